# zoo: heads
"""Correct, another style: heads as explicit column slices, stacked and concatenated."""

import numpy as np


def split_heads(x, n_head):
    x = np.asarray(x)
    if x.ndim != 3:
        raise ValueError(f"expected (B, T, C), got {x.shape}")
    width = x.shape[-1]
    if n_head <= 0 or width % n_head != 0:
        raise ValueError(f"{width} columns cannot be split into {n_head} heads")
    d = width // n_head
    return np.stack([x[:, :, h * d:(h + 1) * d] for h in range(n_head)], axis=1)


def merge_heads(x):
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"expected (B, H, T, D), got {x.shape}")
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=-1)
