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
    ### BEGIN SOLUTION
    x = np.asarray(x)
    if x.ndim != 3:
        raise ValueError(f"split_heads expects (B, T, C), got shape {x.shape}")
    b, t, c = x.shape
    if n_head < 1 or c % n_head:
        raise ValueError(f"width {c} is not divisible by n_head={n_head}")
    # Split C first, while positions stay adjacent, then move heads before time.
    return x.reshape(b, t, n_head, c // n_head).transpose(0, 2, 1, 3)  # (B, H, T, D)
    ### END SOLUTION


def merge_heads(x):
    """Concatenate the heads of ``x`` back into one width: the inverse of ``split_heads``.

    Args:
        x: array-like ``(B, H, T, D)``.

    Returns:
        np.ndarray ``(B, T, H * D)`` whose columns ``h*D:(h+1)*D`` are head ``h``.

    Raises:
        ValueError: if ``x`` is not 4-D.
    """
    ### BEGIN SOLUTION
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"merge_heads expects (B, H, T, D), got shape {x.shape}")
    b, h, t, d = x.shape
    return x.reshape(b, t, h * d)  # BUG: no transpose before the reshape, so heads and positions mix
    ### END SOLUTION
