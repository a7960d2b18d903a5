# zoo: attention_backward names backward-missing-mask
"""Zoo: the backward pass recomputes the weights without the mask."""

import numpy as np

from .softmax import softmax
from .softmax_backward import softmax_backward


def attention_backward(q, k, v, grad_output, mask=None):
    q, k, v, g = (np.asarray(a, dtype=np.float64) for a in (q, k, v, grad_output))
    if g.shape != (*q.shape[:-1], v.shape[-1]):
        raise ValueError("grad_output has the wrong shape")
    if mask is not None and np.all(np.asarray(mask), axis=-1).any():
        raise ValueError("a query has no allowed key")
    scale = 1.0 / np.sqrt(q.shape[-1])
    weights = softmax(q @ np.swapaxes(k, -1, -2) * scale, axis=-1)  # the mask is forgotten
    dv = np.swapaxes(weights, -1, -2) @ g
    ds = softmax_backward(weights, g @ np.swapaxes(v, -1, -2), axis=-1)
    return ds @ k * scale, np.swapaxes(ds, -1, -2) @ q * scale, dv
