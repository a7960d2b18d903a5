"""The checks, one module per exercise. Importing this package registers them.

``hidden`` (answer-key comparisons) is optional: the student handout ships without it.
"""

import contextlib

# The core six and the bonus track (attention_backward, decode, gqa, masks).
from . import (  # noqa: F401
    attention,
    attention_backward,
    decode,
    gqa,
    heads,
    kv_cache,
    masks,
    mha,
    softmax,
    softmax_backward,
)

with contextlib.suppress(ImportError):
    from . import hidden  # noqa: F401

with contextlib.suppress(ImportError):
    from . import hidden_bonus  # noqa: F401
