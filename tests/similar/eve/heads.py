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
    if x.ndim != 3:
        raise ValueError("x is not 3-D")
    B, T, C = x.shape
    if C % n_head != 0:
        raise ValueError("C is not divisible by n_head")
    D = C // n_head
    return x.reshape(B, T, n_head, D).transpose(0, 2, 1, 3)


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
    if x.ndim != 4:
        raise ValueError("x is not 4-D")
    B, H, T, D = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, T, H * D)
