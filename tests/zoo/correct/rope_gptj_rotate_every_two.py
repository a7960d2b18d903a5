# zoo: rope
"""Correct, another style: GPT-J's x * cos + rotate_every_two(x) * sin, with each pair's angle
repeated over its two features (the interleaved layout, written without slicing pairs apart)."""

import numbers

import numpy as np


def rotate_every_two(x):
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    return np.stack([-pairs[..., 1], pairs[..., 0]], axis=-1).reshape(x.shape)


def rotary_embedding(x, positions, base=10000.0):
    x = np.asarray(x)
    if x.dtype.kind == "f":
        dtype = x.dtype
    elif x.dtype.kind in "iu":
        dtype = np.dtype("float64")
    else:
        raise ValueError(f"x must be real numbers, not {x.dtype}")
    if x.ndim < 2 or x.shape[-1] == 0 or x.shape[-1] % 2:
        raise ValueError(f"x has shape {x.shape}; expected (..., T, d) with d even")
    positions = np.asarray(positions)
    if positions.dtype.kind not in "iu":
        raise ValueError("positions must have an integer dtype")
    if positions.shape != (x.shape[-2],):
        raise ValueError("positions must have one entry per row of x")
    if not isinstance(base, numbers.Real) or isinstance(base, bool) or not 0 < base < np.inf:
        raise ValueError("base must be a positive finite number")
    d = x.shape[-1]
    freqs = 1.0 / base ** (np.arange(0, d, 2, dtype=np.float64) / d)
    angles = np.repeat(np.einsum("t,f->tf", positions.astype(np.float64), freqs), 2, axis=-1)
    x = x.astype(np.float64)
    return (x * np.cos(angles) + rotate_every_two(x) * np.sin(angles)).astype(dtype)
