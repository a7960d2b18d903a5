# zoo: attention
"""Correct, another style: einsum, its own softmax, float64 inside and cast back."""

import numpy as np


def causal_mask(t):
    if type(t) is bool or not isinstance(t, (int, np.integer)) or t <= 0:
        raise ValueError(f"t must be a positive int, not {t!r}")
    rows, cols = np.indices((t, t))
    return cols > rows


def scaled_dot_product_attention(q, k, v, mask=None):
    q, k, v = (np.asarray(a) for a in (q, k, v))
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"incompatible shapes q {q.shape}, k {k.shape}, v {v.shape}")
    out_dtype = np.result_type(q, k, v, np.float32)
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    scores = np.einsum("...qd,...kd->...qk", q64, k64) / np.sqrt(q.shape[-1])
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype.kind != "b":
            raise ValueError("the mask must be boolean")
        scores = np.where(mask, -np.inf, scores)
    top = scores.max(axis=-1, keepdims=True)
    if np.isneginf(top).any():
        raise ValueError("some query may attend to no key")
    e = np.exp(scores - top)
    weights = e / e.sum(axis=-1, keepdims=True)
    out = np.einsum("...qk,...kd->...qd", weights, v64)
    return out.astype(out_dtype), weights.astype(out_dtype)
