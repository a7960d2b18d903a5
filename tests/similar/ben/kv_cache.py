"""Exercise `kv_cache`: the causal mask when new queries follow cached keys."""

import numbers

import numpy as np


def kv_cache_mask(n_cached, n_new):
    """The causal mask for ``n_new`` queries that come after ``n_cached`` cached positions.

    The queries are positions ``n_cached, ..., n_cached + n_new - 1`` of the sequence; the
    keys are positions ``0, ..., n_cached + n_new - 1``. Each query sees every cached key,
    itself, and the new keys before it.

    Args:
        n_cached: the number of positions already in the cache, an integer >= 0.
        n_new: the number of new queries, an integer >= 1.

    Returns:
        np.ndarray of dtype bool and shape ``(n_new, n_cached + n_new)``; True (blocked)
        exactly where the key's position is after the query's. With ``n_cached == 0`` this is
        the square causal mask.

    Raises:
        ValueError: if either argument is not an integer, ``n_cached < 0`` or ``n_new < 1``.
    """
    ints = all(isinstance(n, numbers.Integral) and not isinstance(n, bool)
               for n in (n_cached, n_new))
    if not ints:
        raise ValueError(f"integers expected, got {n_cached!r}, {n_new!r}")
    if n_cached < 0 or n_new < 1:
        raise ValueError(f"invalid sizes n_cached={n_cached}, n_new={n_new}")
    return np.triu(np.ones((n_new, n_cached + n_new), dtype=bool), k=n_cached + 1)
