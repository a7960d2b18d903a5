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
    if isinstance(t, bool) or not isinstance(t, numbers.Integral) or t <= 0:
        raise ValueError("t should be a positive whole number")
    mask = np.zeros((t, t), dtype=bool)
    for row in range(t):
        for col in range(row + 1, t):
            mask[row, col] = True
    return mask


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
        raise ValueError("queries and keys must have the same width")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError("there must be as many values as keys")
    scale = 1.0 / np.sqrt(q.shape[-1])
    scores = np.matmul(q, np.swapaxes(k, -2, -1)) * scale
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != bool:
            raise ValueError("the mask has to be a boolean array")
        scores = np.where(mask, -np.inf, scores)
    # every query needs at least one key it may look at
    for row in scores.reshape(-1, scores.shape[-1]):
        if np.all(row == -np.inf):
            raise ValueError("a query cannot see any key")
    weights = softmax(scores, axis=-1)
    output = np.matmul(weights, v)
    return output, weights
