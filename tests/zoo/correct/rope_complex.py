# zoo: rope
"""Correct, another style: each pair as one complex number, multiplied by exp(i * angle)."""

import numpy as np


def rotary_embedding(x, positions, base=10000.0):
    x = np.asarray(x)
    positions = np.asarray(positions)
    if not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
        raise ValueError("x must be real")
    if x.ndim < 2 or x.shape[-1] < 2 or x.shape[-1] % 2 == 1:
        raise ValueError("x must be (..., T, d) with d even")
    if not np.issubdtype(positions.dtype, np.integer) or positions.shape != x.shape[-2:-1]:
        raise ValueError("positions must be T integers")
    if isinstance(base, bool) or not np.isfinite(base) or base <= 0:
        raise ValueError("base must be positive")
    out_dtype = x.dtype if np.issubdtype(x.dtype, np.floating) else np.float64
    d = x.shape[-1]
    theta = np.outer(positions, np.power(float(base), -np.arange(0, d, 2) / d))
    z = (x[..., 0::2] + 1j * x[..., 1::2]) * np.exp(1j * theta)
    return np.stack([z.real, z.imag], axis=-1).reshape(x.shape).astype(out_dtype)
