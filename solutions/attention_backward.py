"""Bonus exercise `attention_backward`: the gradients of scaled dot-product attention."""

import numpy as np

from .softmax import softmax
from .softmax_backward import softmax_backward


def attention_backward(q, k, v, grad_output, mask=None):
    """Back-propagate ``grad_output = dL/d(output)`` through masked attention, by hand.

    The forward pass is the one of ``scaled_dot_product_attention``::

        scores  = q @ k^T / sqrt(d_k)   (blocked entries set to -inf)
        weights = the softmax of each row of scores
        output  = weights @ v

    Args:
        q: array-like ``(..., Tq, d_k)`` queries.
        k: array-like ``(..., Tk, d_k)`` keys, with the same leading axes as ``q``.
        v: array-like ``(..., Tk, d_v)`` values, with the same leading axes as ``q``.
        grad_output: array-like ``(..., Tq, d_v)``: ``dL/d(output)``.
        mask: optional bool array-like broadcastable to ``(..., Tq, Tk)``; True blocks a key.

    Returns:
        ``(dq, dk, dv)``, np.ndarrays with the shapes of ``q``, ``k`` and ``v`` and dtype
        ``np.result_type(q, k, v, grad_output, np.float32)``. A blocked (query, key) pair has
        weight 0 and passes no gradient: a key blocked for every query gets ``dk = dv = 0``.
        Each row of the softmax backward sums to zero, so ``dk`` sums to zero over the keys.

    Raises:
        ValueError: if q and k widths differ, if k and v lengths differ, if ``grad_output``
            does not have the output's shape, if the mask is not boolean, or if some query
            has no allowed key.
    """
    ### BEGIN SOLUTION
    q, k, v, g = (np.asarray(a) for a in (q, k, v, grad_output))
    dtype = np.result_type(q, k, v, g, np.float32)
    q, k, v, g = (a.astype(dtype) for a in (q, k, v, g))
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q width {q.shape[-1]} differs from k width {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k has {k.shape[-2]} positions but v has {v.shape[-2]}")
    if g.shape != (*q.shape[:-1], v.shape[-1]):
        raise ValueError(f"grad_output has shape {g.shape}, expected the output's "
                         f"{(*q.shape[:-1], v.shape[-1])}")
    scale = 1.0 / np.sqrt(q.shape[-1])
    # 1. Forward again: the backward pass needs the weights.
    scores = q @ np.swapaxes(k, -1, -2) * scale  # (..., Tq, Tk)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != np.bool_:
            raise ValueError(f"mask must be boolean (True = blocked), got dtype {mask.dtype}")
        scores = np.where(mask, -np.inf, scores)
    if np.any(np.all(np.isneginf(scores), axis=-1)):
        raise ValueError("a query has no allowed key: its whole mask row is True")
    weights = softmax(scores, axis=-1)
    # 2. output = weights @ v: both factors get a gradient.
    dv = np.swapaxes(weights, -1, -2) @ g  # (..., Tk, d_v)
    dweights = g @ np.swapaxes(v, -1, -2)  # (..., Tq, Tk)
    # 3. Through the softmax; blocked entries have weight 0, so their gradient is 0 too.
    dscores = softmax_backward(weights, dweights, axis=-1)
    # 4. scores = q @ k^T * scale.
    dq = dscores @ k * scale  # (..., Tq, d_k)
    dk = np.swapaxes(dscores, -1, -2) @ q * scale  # (..., Tk, d_k)
    return dq.astype(dtype), dk.astype(dtype), dv.astype(dtype)
    ### END SOLUTION
