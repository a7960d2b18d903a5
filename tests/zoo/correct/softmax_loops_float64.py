# zoo: softmax
"""Correct, another style: an explicit loop over slices, float64 inside, cast back at the end."""

import math

import numpy as np


def softmax(logits, axis=-1):
    arr = np.asarray(logits)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"real numbers only, not {arr.dtype}")
    result_dtype = np.result_type(arr.dtype, np.float32)
    if arr.dtype.kind in "iu":
        for value in arr.ravel().tolist():
            if int(result_dtype.type(value)) != value:
                raise ValueError(f"{value} is not exactly representable as {result_dtype}")
    work = np.moveaxis(arr.astype(np.float64), axis, -1)  # (..., n): slices last
    out = np.empty_like(work)
    if work.shape[-1] == 0:
        raise ValueError("an empty axis has no softmax")
    for index in np.ndindex(work.shape[:-1]):
        row = [float(v) for v in work[index]]
        if any(math.isnan(v) or v == math.inf for v in row):
            raise ValueError("NaN or +inf logits")
        top = max(row)
        if top == -math.inf:
            raise ValueError("a fully masked slice")
        exps = [math.exp(v - top) for v in row]
        total = math.fsum(exps)
        out[index] = [e / total for e in exps]
    return np.moveaxis(out, -1, axis).astype(result_dtype)
