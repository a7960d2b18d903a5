# zoo: masks
"""Zoo (correct): plain Python loops filling the masks entry by entry."""

import numpy as np


def sliding_window_mask(t, window):
    if not isinstance(t, int) or not isinstance(window, int) or t < 1 or window < 1:
        raise ValueError(f"t and window must be positive integers, got {t!r}, {window!r}")
    mask = np.ones((t, t), dtype=bool)
    for i in range(t):
        for j in range(max(0, i - window + 1), i + 1):
            mask[i, j] = False
    return mask


def padding_mask(lengths, t):
    if not isinstance(t, int) or t < 1:
        raise ValueError(f"t must be a positive integer, got {t!r}")
    lengths = [int(n) for n in np.asarray(lengths).ravel()]
    mask = np.zeros((len(lengths), 1, 1, t), dtype=bool)
    for b, n in enumerate(lengths):
        if not 1 <= n <= t:
            raise ValueError(f"length {n} outside 1..{t}")
        mask[b, 0, 0, n:] = True
    return mask
