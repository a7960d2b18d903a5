"""One proxy question whose answer does not fit the grading process's memory: the key's
MultiHeadAttention(30000, 1) is four 30000 x 30000 float32 layers (14.4 GB), built in the
GRADING process (Student._answer -> _module_call("__init__")). Passes the allow-list as is."""
from .kv_cache import kv_cache_mask
from .mha import MultiHeadAttention

MultiHeadAttention(30000, 1)
