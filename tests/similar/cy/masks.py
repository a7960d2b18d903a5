"""Bonus exercise `masks`: sliding-window masks and padding masks for batches."""

import numbers

import numpy as np


def sliding_window_mask(t, window):
    if any(type(a) is bool or not isinstance(a, numbers.Integral) or a < 1 for a in (t, window)):
        raise ValueError("t and window must be positive integers")
    return ~np.tri(t, dtype=bool) | np.tri(t, k=-window, dtype=bool)


def padding_mask(lengths, t):
    if type(t) is bool or not isinstance(t, numbers.Integral) or t < 1:
        raise ValueError("t must be a positive integer")
    n = np.asarray(lengths)
    if n.ndim != 1 or n.dtype.kind not in "iu" or (n < 1).any() or (n > t).any():
        raise ValueError("bad lengths")
    return np.arange(t) >= n[:, None, None, None]
