"""The checks, one module per exercise. Importing this package registers them.

``hidden`` (answer-key comparisons) is optional: the student handout ships without it.
"""

import contextlib

from . import attention, heads, kv_cache, mha, softmax, softmax_backward  # noqa: F401
from . import attention_backward, decode, gqa, masks  # noqa: F401  (the bonus track)

with contextlib.suppress(ImportError):
    from . import hidden  # noqa: F401

with contextlib.suppress(ImportError):
    from . import hidden_bonus  # noqa: F401
