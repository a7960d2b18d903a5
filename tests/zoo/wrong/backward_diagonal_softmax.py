# zoo: attention_backward
"""Zoo: treats the softmax as elementwise, dS = P * dP (only the Jacobian's diagonal)."""

import numpy as np

from .softmax import softmax


def attention_backward(q, k, v, grad_output, mask=None):
    q, k, v, g = (np.asarray(a, dtype=np.float64) for a in (q, k, v, grad_output))
    if g.shape != (*q.shape[:-1], v.shape[-1]):
        raise ValueError("grad_output has the wrong shape")
    scale = 1.0 / np.sqrt(q.shape[-1])
    scores = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        scores = np.where(mask, -np.inf, scores)
    weights = softmax(scores, axis=-1)
    dv = np.swapaxes(weights, -1, -2) @ g
    ds = weights * (g @ np.swapaxes(v, -1, -2))
    return ds @ k * scale, np.swapaxes(ds, -1, -2) @ q * scale, dv
