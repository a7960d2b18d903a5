"""Exercise `kv_cache`: the causal mask when new queries follow cached keys."""

import numbers

import numpy as np


def kv_cache_mask(n_cached, n_new):
    ok = all(isinstance(n, numbers.Integral) and type(n) is not bool for n in (n_cached, n_new))
    if not ok or n_cached < 0 or n_new < 1:
        raise ValueError("bad arguments")
    return ~np.tri(n_new, n_cached + n_new, k=n_cached, dtype=bool)
