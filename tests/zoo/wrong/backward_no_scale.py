# zoo: attention_backward
"""Zoo: scales the scores in the forward pass but not in dq and dk; no input checks."""

import numpy as np

from .softmax import softmax
from .softmax_backward import softmax_backward


def attention_backward(q, k, v, grad_output, mask=None):
    q, k, v, g = (np.asarray(a, dtype=np.float64) for a in (q, k, v, grad_output))
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, -np.inf, scores)
    weights = softmax(scores, axis=-1)
    dv = np.swapaxes(weights, -1, -2) @ g
    ds = softmax_backward(weights, g @ np.swapaxes(v, -1, -2), axis=-1)
    return ds @ k, np.swapaxes(ds, -1, -2) @ q, dv
