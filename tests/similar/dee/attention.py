"""Exercise `attention`: the causal mask and masked scaled dot-product attention."""

import numbers

import numpy as np

from .softmax import softmax


def _positive_integer(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} has to be a positive integer (got {value!r})")


def _arrays(q, k, v):
    """The queries, keys and values as arrays whose widths and lengths agree."""
    queries, keys, values = np.asarray(q), np.asarray(k), np.asarray(v)
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(f"query width {queries.shape[-1]} != key width {keys.shape[-1]}")
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(f"{keys.shape[-2]} keys but {values.shape[-2]} values")
    return queries, keys, values


def _blocked(mask):
    if mask is None:
        return None
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        raise ValueError(f"a mask holds booleans, not {mask.dtype}")
    return mask


def causal_mask(t):
    """The mask that hides the future from each of ``t`` positions.

    Args:
        t: the sequence length, a positive integer.

    Returns:
        np.ndarray of dtype bool and shape ``(t, t)``; entry ``[i, j]`` is True (blocked)
        exactly when ``j > i``. A position always sees itself and everything before it.

    Raises:
        ValueError: if ``t`` is not a positive integer.
    """
    _positive_integer("t", t)
    positions = np.arange(t)
    return np.greater.outer(positions, positions).T


def scaled_dot_product_attention(q, k, v, mask=None):
    """Attend from each query to the keys and average the values.

    Args:
        q: array-like ``(..., Tq, d_k)`` queries.
        k: array-like ``(..., Tk, d_k)`` keys.
        v: array-like ``(..., Tk, d_v)`` values.
        mask: optional bool array-like broadcastable to ``(..., Tq, Tk)``; True blocks a
            key for a query. It applies to the scores, before the softmax.

    Returns:
        ``(output, weights)``: output ``(..., Tq, d_v)`` and weights ``(..., Tq, Tk)``, where
        ``weights = softmax(q k^T / sqrt(d_k) with blocked scores at -inf)`` row by row and
        ``output = weights @ v``. float64 inputs give float64; float32 inputs may give
        float32 or float64.

    Raises:
        ValueError: if q and k widths differ, if k and v lengths differ, if the mask is not
            boolean, or if some query has no allowed key.
    """
    queries, keys, values = _arrays(q, k, v)
    blocked = _blocked(mask)
    width = queries.shape[-1]
    scores = np.matmul(queries, keys.swapaxes(-1, -2)) / np.sqrt(width)
    if blocked is not None:
        scores = np.where(blocked, -np.inf, scores)
    if (np.max(scores, axis=-1) == -np.inf).any():
        raise ValueError("each query must be allowed at least one key")
    weights = softmax(scores, axis=-1)
    return np.matmul(weights, values), weights
