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
    raise NotImplementedError("attention: not implemented yet")


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
    raise NotImplementedError("attention: not implemented yet")
