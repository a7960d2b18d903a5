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
    for value in (n_cached, n_new):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError("both arguments must be integers")
    if n_cached < 0:
        raise ValueError("n_cached cannot be negative")
    if n_new < 1:
        raise ValueError("n_new must be at least 1")
    total = n_cached + n_new
    mask = np.zeros((n_new, total), dtype=bool)
    for row in range(n_new):
        position = n_cached + row
        for col in range(total):
            if col > position:
                mask[row, col] = True
    return mask
