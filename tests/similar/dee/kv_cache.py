"""Exercise `kv_cache`: the causal mask when new queries follow cached keys."""

import numbers

import numpy as np


def _integer(name, value, smallest):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} has to be an integer (got {value!r})")
    if value < smallest:
        raise ValueError(f"{name} has to be at least {smallest} (got {value})")


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
    _integer("n_cached", n_cached, smallest=0)
    _integer("n_new", n_new, smallest=1)
    rows = n_cached + np.arange(n_new)  # each query's absolute position
    return np.arange(n_cached + n_new) > rows.reshape(-1, 1)
