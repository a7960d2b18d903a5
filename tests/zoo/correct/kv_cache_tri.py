# zoo: kv_cache
"""Correct, another style: the allowed region as np.tri shifted by the cache length."""

import numpy as np


def kv_cache_mask(n_cached, n_new):
    for value in (n_cached, n_new):
        if type(value) is bool or not isinstance(value, (int, np.integer)):
            raise ValueError(f"expected an integer, got {value!r}")
    if n_cached < 0:
        raise ValueError("n_cached must be >= 0")
    if n_new < 1:
        raise ValueError("n_new must be >= 1")
    allowed = np.tri(n_new, n_cached + n_new, k=n_cached, dtype=bool)
    return ~allowed
