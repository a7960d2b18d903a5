# zoo: softmax_backward
"""Correct, another style: the full Jacobian diag(p) - p p^T, slice by slice."""

import numpy as np


def softmax_backward(probabilities, upstream, axis=-1):
    p = np.asarray(probabilities)
    g = np.asarray(upstream)
    if p.shape != g.shape:
        raise ValueError(f"shapes differ: {p.shape} and {g.shape}")
    dtype = np.result_type(p.dtype, g.dtype, np.float32)
    p_last = np.moveaxis(p.astype(dtype), axis, -1)
    g_last = np.moveaxis(g.astype(dtype), axis, -1)
    out = np.empty_like(p_last)
    for index in np.ndindex(p_last.shape[:-1]):
        s = p_last[index]
        jacobian = np.diag(s) - np.outer(s, s)  # d p_i / d logit_j, symmetric
        out[index] = jacobian @ g_last[index]
    return np.moveaxis(out, -1, axis)
