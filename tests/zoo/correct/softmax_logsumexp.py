# zoo: softmax
"""Correct, another style: softmax as exp(x - logsumexp(x)), validation first."""

import numpy as np


def softmax(logits, axis=-1):
    x = np.asarray(logits)
    if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)
            or x.dtype == np.bool_):
        raise ValueError(f"cannot take the softmax of {x.dtype} values")
    out_dtype = np.result_type(x.dtype, np.float32)
    if np.issubdtype(x.dtype, np.integer):
        as_float = x.astype(out_dtype)
        if any(int(f) != int(i) for f, i in zip(as_float.flat, x.flat)):
            raise ValueError("these integers cannot be represented exactly as floats")
        x = as_float
    x = x.astype(out_dtype)
    if np.isnan(x).any() or (x == np.inf).any():
        raise ValueError("NaN or +inf in the logits")
    top = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    if (top == -np.inf).any():
        raise ValueError("a slice has nothing above -inf")
    log_norm = top + np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True))
    return np.exp(x - log_norm)
