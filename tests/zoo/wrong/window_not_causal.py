# zoo: masks
"""Zoo: a symmetric band |i - j| < window, which lets queries see the future; no input checks."""

import numpy as np


def sliding_window_mask(t, window):
    i = np.arange(t)[:, None]
    j = np.arange(t)[None, :]
    return np.abs(i - j) >= window


def padding_mask(lengths, t):
    lengths = np.asarray(lengths)
    return (np.arange(t)[None, :] >= lengths[:, None])[:, None, None, :]
