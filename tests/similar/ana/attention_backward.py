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
    grad = np.asarray(grad_output)
    kind = np.result_type(q, k, v, grad, np.float32)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("queries and keys must have the same width")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError("there must be as many values as keys")
    if grad.shape != q.shape[:-1] + v.shape[-1:]:
        raise ValueError("grad_output must have the shape of the output")
    scale = 1.0 / np.sqrt(q.shape[-1])
    # forward pass again, keeping the weights
    scores = np.matmul(q, np.swapaxes(k, -2, -1)) * scale
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != bool:
            raise ValueError("the mask has to be a boolean array")
        scores = np.where(mask, -np.inf, scores)
    for row in scores.reshape(-1, scores.shape[-1]):
        if np.all(row == -np.inf):
            raise ValueError("a query cannot see any key")
    weights = softmax(scores, axis=-1)
    # backward pass, one step at a time
    grad_values = np.matmul(np.swapaxes(weights, -2, -1), grad)
    grad_weights = np.matmul(grad, np.swapaxes(v, -2, -1))
    grad_scores = softmax_backward(weights, grad_weights, axis=-1) * scale
    grad_queries = np.matmul(grad_scores, k)
    grad_keys = np.matmul(np.swapaxes(grad_scores, -2, -1), q)
    return grad_queries.astype(kind), grad_keys.astype(kind), grad_values.astype(kind)
