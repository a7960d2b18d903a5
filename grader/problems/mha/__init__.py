"""Exercise `mha`: a multi-head self-attention module in PyTorch, against
`nn.MultiheadAttention`.

One exercise in three modules: ``checks`` (the declaration, reference, worker operations and
checks), ``cases`` (the strategies, and the answers a check compares on a case) and
``misconceptions`` (the mistakes it names, and their probes).
"""

from . import misconceptions  # noqa: F401  (registers the probes on EX)
from .checks import EX, MultiHeadAttention, with_weights

__all__ = ["EX", "MultiHeadAttention", "with_weights"]
