# zoo: attention
"""Correct, another style: q scaled before the product, a -1e9 additive mask, rows checked first."""

import numbers

import numpy as np


def causal_mask(t):
    if isinstance(t, bool) or not isinstance(t, numbers.Integral) or t <= 0:
        raise ValueError(f"t must be a positive integer, got {t!r}")
    return np.tril(np.ones((t, t), dtype=bool)) == 0


def scaled_dot_product_attention(q, k, v, mask=None):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("q and k must have the same width")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError("k and v must have the same number of positions")
    scores = (q / np.sqrt(q.shape[-1])) @ np.swapaxes(k, -1, -2)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != bool:
            raise ValueError("the mask must be boolean")
        # Every row keeps at least one key, so the -1e9 entries underflow to exactly 0 below.
        if np.broadcast_to(mask, scores.shape).all(axis=-1).any():
            raise ValueError("some query has no allowed key")
        scores = scores + np.where(mask, -1e9, 0.0)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights
