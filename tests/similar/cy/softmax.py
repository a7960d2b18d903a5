"""Exercise `softmax`: a numerically stable softmax in NumPy."""

import numpy as np


def softmax(logits, axis=-1):
    x = np.asarray(logits)
    f = x.astype(np.result_type(x.dtype, np.float32)) if x.dtype.kind in "biuf" else None
    with np.errstate(invalid="ignore"):
        if f is None or x.dtype.kind in "iu" and (f.astype(x.dtype) != x).any():
            raise ValueError("logits must be real and exact in floating point")
    if np.isnan(f).any() or (f == np.inf).any() or (f == -np.inf).all(axis=axis).any():
        raise ValueError("bad logits")
    e = np.exp(f - f.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
