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
    # BUG: nothing is validated: a 4-D x is split without complaint instead of raising ValueError
    return x.reshape(x.shape[0], x.shape[1], n_head, -1).transpose(0, 2, 1, 3)  # (B, H, T, D)
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
    # BUG: nothing is validated: a 3-D or 5-D x is reshaped instead of raising ValueError
    return x.swapaxes(1, 2).reshape(x.shape[0], x.shape[2], -1)  # (B, T, H*D)
    ### END SOLUTION
