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
    q, k, v, g = (np.asarray(a) for a in (q, k, v, grad_output))
    dt = np.result_type(q, k, v, g, np.float32)
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"bad shapes {q.shape}, {k.shape}, {v.shape}")
    if g.shape != (*q.shape[:-1], v.shape[-1]):
        raise ValueError(f"grad_output shape {g.shape} is not the output's")
    c = 1 / np.sqrt(q.shape[-1])
    s = np.einsum("...id,...jd->...ij", q, k) * c
    if mask is not None:
        m = np.asarray(mask)
        if m.dtype.kind != "b":
            raise ValueError(f"mask dtype must be bool, got {m.dtype}")
        s = np.where(m, -np.inf, s)
    if np.isneginf(s).all(axis=-1).any():
        raise ValueError("some query is masked from every key")
    w = softmax(s, axis=-1)
    dv = np.einsum("...ij,...id->...jd", w, g)
    ds = softmax_backward(w, np.einsum("...id,...jd->...ij", g, v), axis=-1) * c
    dq = np.einsum("...ij,...jd->...id", ds, k)
    dk = np.einsum("...ij,...id->...jd", ds, q)
    return dq.astype(dt), dk.astype(dt), dv.astype(dt)
