"""Exercise `heads`: splitting the model width into heads and merging it back."""

import numpy as np


def _with_axes(x, count, shape):
    array = np.asarray(x)
    if array.ndim != count:
        raise ValueError(f"expected an array shaped {shape}, got {array.shape}")
    return array


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
    array = _with_axes(x, 3, "(B, T, C)")
    width = array.shape[-1]
    if n_head < 1 or width % n_head != 0:
        raise ValueError(f"{n_head} heads cannot share a width of {width} equally")
    chunks = np.split(array, n_head, axis=-1)  # H pieces of (B, T, D)
    return np.stack(chunks, axis=1)


def merge_heads(x):
    """Concatenate the heads of ``x`` back into one width: the inverse of ``split_heads``.

    Args:
        x: array-like ``(B, H, T, D)``.

    Returns:
        np.ndarray ``(B, T, H * D)`` whose columns ``h*D:(h+1)*D`` are head ``h``.

    Raises:
        ValueError: if ``x`` is not 4-D.
    """
    array = _with_axes(x, 4, "(B, H, T, D)")
    return np.concatenate(list(np.moveaxis(array, 1, 0)), axis=-1)
