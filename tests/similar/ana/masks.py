"""Bonus exercise `masks`: sliding-window masks and padding masks for batches."""

import numbers

import numpy as np


def sliding_window_mask(t, window):
    """The causal mask of a sliding-window model: each query sees at most ``window`` keys.

    Query ``i`` sees keys ``max(0, i - window + 1), ..., i``: itself and the ``window - 1``
    positions before it, never the future. ``window >= t`` gives the plain causal mask.

    Args:
        t: the sequence length, a positive integer.
        window: how many keys a query may see, itself included; a positive integer.

    Returns:
        np.ndarray of dtype bool and shape ``(t, t)``; entry ``[i, j]`` is True (blocked)
        exactly when ``j > i`` or ``i - j >= window``. Row ``i`` allows ``min(i + 1, window)``
        keys.

    Raises:
        ValueError: if ``t`` or ``window`` is not a positive integer.
    """
    for value in (t, window):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError("t and window must be positive integers")
    mask = np.ones((t, t), dtype=bool)
    for row in range(t):
        for col in range(max(0, row - window + 1), row + 1):
            mask[row, col] = False
    return mask


def padding_mask(lengths, t):
    """The mask that hides the padding at the end of each sequence of a batch.

    Sequence ``b`` holds ``lengths[b]`` real tokens followed by padding up to ``t``. Padding
    is hidden as a *key*: no query may attend to it. Queries at padded positions still get
    (meaningless) outputs, which the caller ignores.

    Args:
        lengths: array-like of B integers, each in ``1..t``.
        t: the padded length, a positive integer.

    Returns:
        np.ndarray of dtype bool and shape ``(B, 1, 1, t)``; entry ``[b, 0, 0, j]`` is True
        (blocked) exactly when ``j >= lengths[b]``. It broadcasts against attention scores
        ``(B, H, T, t)`` and combines with a causal mask by ``|``.

    Raises:
        ValueError: if ``t`` is not a positive integer, if ``lengths`` is not a 1-D array of
            integers, or if a length is below 1 or above ``t``.
    """
    if isinstance(t, bool) or not isinstance(t, numbers.Integral) or t < 1:
        raise ValueError("t must be a positive integer")
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or lengths.dtype.kind not in ("i", "u"):
        raise ValueError("lengths must be a 1-D array of integers")
    mask = np.zeros((len(lengths), 1, 1, t), dtype=bool)
    for b in range(len(lengths)):
        n = int(lengths[b])
        if n < 1 or n > t:
            raise ValueError("each length must be between 1 and t")
        for col in range(n, t):
            mask[b, 0, 0, col] = True
    return mask
