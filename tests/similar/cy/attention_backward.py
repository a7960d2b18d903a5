"""Bonus exercise `attention_backward`: the gradients of scaled dot-product attention."""

import numpy as np

from .softmax import softmax
from .softmax_backward import softmax_backward


def attention_backward(q, k, v, grad_output, mask=None):
    q, k, v, g = map(np.asarray, (q, k, v, grad_output))
    dt = np.result_type(q, k, v, g, np.float32)
    if (q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]
            or g.shape != q.shape[:-1] + v.shape[-1:]):
        raise ValueError("shape mismatch")
    c = q.shape[-1] ** -0.5
    s = q @ k.swapaxes(-1, -2) * c
    if mask is not None:
        if np.asarray(mask).dtype != bool:
            raise ValueError("mask must be bool")
        s = np.where(mask, -np.inf, s)
    if np.isneginf(s).all(-1).any():
        raise ValueError("fully masked row")
    w = softmax(s)
    ds = softmax_backward(w, g @ v.swapaxes(-1, -2)) * c
    dq, dk, dv = ds @ k, ds.swapaxes(-1, -2) @ q, w.swapaxes(-1, -2) @ g
    return dq.astype(dt), dk.astype(dt), dv.astype(dt)
