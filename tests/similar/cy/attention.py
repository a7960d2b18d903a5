"""Exercise `attention`: the causal mask and masked scaled dot-product attention."""

import numbers

import numpy as np

from .softmax import softmax


def causal_mask(t):
    if type(t) is bool or not isinstance(t, numbers.Integral) or t < 1:
        raise ValueError("bad t")
    return ~np.tri(t, dtype=bool)


def scaled_dot_product_attention(q, k, v, mask=None):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError("shape mismatch")
    s = q @ k.swapaxes(-1, -2) / q.shape[-1] ** 0.5
    if mask is not None:
        if np.asarray(mask).dtype != bool:
            raise ValueError("mask must be bool")
        s = np.where(mask, -np.inf, s)
    if np.isneginf(s).all(-1).any():
        raise ValueError("fully masked row")
    w = softmax(s)
    return w @ v, w
