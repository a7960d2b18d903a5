"""Exercise `attention`: the causal mask and masked scaled dot-product attention."""

import numbers

import numpy as np

from .softmax import softmax


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
    if not isinstance(t, numbers.Integral) or isinstance(t, bool) or t <= 0:
        raise ValueError("t is not a positive integer")
    i = np.arange(t).reshape(t, 1)
    j = np.arange(t).reshape(1, t)
    return j > i


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
    q = np.asarray(q)
    k = np.asarray(k)
    v = np.asarray(v)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("q and k widths differ")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError("k and v lengths differ")
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != bool:
            raise ValueError("the mask is not boolean")
        scores = np.where(mask, -np.inf, scores)
    if np.isneginf(scores).all(axis=-1).any():
        raise ValueError("some query has no allowed key")
    weights = softmax(scores, axis=-1)
    output = weights @ v
    return output, weights
