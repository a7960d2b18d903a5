"""Exercise `heads`: splitting the model width into heads and merging it back."""

import numpy as np


def split_heads(x, n_head):
    """Split the last axis of ``x`` into ``n_head`` heads.

    Args:
        x: array-like ``(B, T, C)``.
        n_head: the number of heads H, a positive integer dividing C.

    Returns:
        np.ndarray ``(B, H, T, C // H)`` whose head ``h`` is ``x[:, :, h*D:(h+1)*D]`` with
        ``D = C // H``.

    Raises:
        ValueError: if ``x`` is not 3-D or C is not divisible by ``n_head``.
    """
    x = np.asarray(x)
    if len(x.shape) != 3:
        raise ValueError("x must have three axes (B, T, C)")
    batch, time, width = x.shape
    if n_head <= 0 or width % n_head != 0:
        raise ValueError("n_head must divide the width")
    size = width // n_head
    heads = np.zeros((batch, n_head, time, size), dtype=x.dtype)
    for h in range(n_head):
        heads[:, h, :, :] = x[:, :, h * size:(h + 1) * size]
    return heads


def merge_heads(x):
    """Concatenate the heads of ``x`` back into one width: the inverse of ``split_heads``.

    Args:
        x: array-like ``(B, H, T, D)``.

    Returns:
        np.ndarray ``(B, T, H * D)`` whose columns ``h*D:(h+1)*D`` are head ``h``.

    Raises:
        ValueError: if ``x`` is not 4-D.
    """
    x = np.asarray(x)
    if len(x.shape) != 4:
        raise ValueError("x must have four axes (B, H, T, D)")
    batch, n_head, time, size = x.shape
    merged = np.zeros((batch, time, n_head * size), dtype=x.dtype)
    for h in range(n_head):
        merged[:, :, h * size:(h + 1) * size] = x[:, h, :, :]
    return merged
