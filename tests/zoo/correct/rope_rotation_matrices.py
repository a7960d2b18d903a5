# zoo: rope
"""Correct, another style: loops over positions and pairs, each pair times a 2x2 rotation."""

import math

import numpy as np


def rotary_embedding(x, positions, base=10000.0):
    x = np.array(x)
    if x.dtype == bool or x.dtype.kind not in "iuf":
        raise ValueError(f"bad dtype {x.dtype}")
    if x.ndim < 2:
        raise ValueError("x needs a position axis and a feature axis")
    n_pos, d = x.shape[-2], x.shape[-1]
    if d == 0 or d % 2 != 0:
        raise ValueError("d must be even")
    pos = np.array(positions)
    if pos.dtype.kind not in "iu" or pos.ndim != 1 or len(pos) != n_pos:
        raise ValueError("one integer position per row")
    if type(base) is bool or not base > 0 or math.isinf(base):
        raise ValueError("base must be a positive number")
    result = np.zeros(x.shape, dtype=x.dtype if x.dtype.kind == "f" else np.float64)
    for t in range(n_pos):
        for i in range(d // 2):
            angle = int(pos[t]) * base ** (-2 * i / d)
            rotation = np.array([[math.cos(angle), -math.sin(angle)],
                                 [math.sin(angle), math.cos(angle)]])
            pair = x[..., t, 2 * i:2 * i + 2].astype(np.float64)
            result[..., t, 2 * i:2 * i + 2] = pair @ rotation.T
    return result
