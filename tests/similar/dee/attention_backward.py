"""Bonus exercise `attention_backward`: the gradients of scaled dot-product attention."""

import numpy as np

from .softmax import softmax
from .softmax_backward import softmax_backward


class _Forward:
    """The forward pass, kept: the backward pass needs its weights."""

    def __init__(self, queries, keys, values, mask):
        self.scale = 1.0 / np.sqrt(queries.shape[-1])
        scores = np.matmul(queries, keys.swapaxes(-1, -2)) * self.scale
        if mask is not None:
            mask = np.asarray(mask)
            if mask.dtype != np.bool_:
                raise ValueError(f"a mask holds booleans, not {mask.dtype}")
            scores = np.where(mask, -np.inf, scores)
        if (np.max(scores, axis=-1) == -np.inf).any():
            raise ValueError("each query must be allowed at least one key")
        self.weights = softmax(scores, axis=-1)


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
    queries, keys, values = (np.asarray(a) for a in (q, k, v))
    grad = np.asarray(grad_output)
    dtype = np.result_type(queries, keys, values, grad, np.float32)
    if queries.shape[-1] != keys.shape[-1] or keys.shape[-2] != values.shape[-2]:
        raise ValueError("the widths of q and k, or the lengths of k and v, disagree")
    if grad.shape != queries.shape[:-1] + values.shape[-1:]:
        raise ValueError(f"grad_output has shape {grad.shape}, not the output's")
    forward = _Forward(queries, keys, values, mask)
    grad_values = np.matmul(forward.weights.swapaxes(-1, -2), grad)
    grad_weights = np.matmul(grad, values.swapaxes(-1, -2))
    grad_scores = softmax_backward(forward.weights, grad_weights, axis=-1) * forward.scale
    grad_queries = np.matmul(grad_scores, keys)
    grad_keys = np.matmul(grad_scores.swapaxes(-1, -2), queries)
    return tuple(g.astype(dtype) for g in (grad_queries, grad_keys, grad_values))
