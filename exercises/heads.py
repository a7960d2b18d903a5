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
    raise NotImplementedError("heads: not implemented yet")


def merge_heads(x):
    """Concatenate the heads of ``x`` back into one width: the inverse of ``split_heads``.

    Args:
        x: array-like ``(B, H, T, D)``.

    Returns:
        np.ndarray ``(B, T, H * D)`` whose columns ``h*D:(h+1)*D`` are head ``h``.

    Raises:
        ValueError: if ``x`` is not 4-D.
    """
    raise NotImplementedError("heads: not implemented yet")
