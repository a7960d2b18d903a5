# zoo: masks names padding-on-queries
"""Zoo: the padding mask hides padded queries (rows) instead of padded keys."""

import numpy as np


def sliding_window_mask(t, window):
    if t < 1 or window < 1:
        raise ValueError("t and window must be positive")
    i = np.arange(t)[:, None]
    j = np.arange(t)[None, :]
    return (j > i) | (i - j >= window)


def padding_mask(lengths, t):
    lengths = np.asarray(lengths)
    if t < 1 or lengths.min() < 1 or lengths.max() > t:
        raise ValueError("bad lengths")
    return (np.arange(t)[None, :] >= lengths[:, None])[:, None, :, None]  # (B, 1, t, 1)
