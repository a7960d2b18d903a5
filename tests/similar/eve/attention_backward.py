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
    q = np.asarray(q)
    k = np.asarray(k)
    v = np.asarray(v)
    grad_output = np.asarray(grad_output)
    dtype = np.result_type(q, k, v, grad_output, np.float32)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("q and k widths differ")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError("k and v lengths differ")
    if grad_output.shape != q.shape[:-1] + v.shape[-1:]:
        raise ValueError("grad_output does not have the output's shape")
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
    dv = np.swapaxes(weights, -1, -2) @ grad_output
    dweights = grad_output @ np.swapaxes(v, -1, -2)
    dscores = softmax_backward(weights, dweights, axis=-1) / np.sqrt(d_k)
    dq = dscores @ k
    dk = np.swapaxes(dscores, -1, -2) @ q
    return dq.astype(dtype), dk.astype(dtype), dv.astype(dtype)
