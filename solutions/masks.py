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
    ### BEGIN SOLUTION
    for name, value in (("t", t), ("window", window)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    query = np.arange(t)[:, None]
    key = np.arange(t)[None, :]
    # The distance i - j counts how far back a key lies; 0 is the query itself.
    return (key > query) | (query - key >= window)
    ### END SOLUTION


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
    ### BEGIN SOLUTION
    if isinstance(t, bool) or not isinstance(t, numbers.Integral) or t < 1:
        raise ValueError(f"t must be a positive integer, got {t!r}")
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or lengths.dtype.kind not in "iu":
        raise ValueError(f"lengths must be a 1-D array of integers, got {lengths!r}")
    if lengths.size and (lengths.min() < 1 or lengths.max() > t):
        raise ValueError(f"every length must lie in 1..{t}, got {lengths.tolist()}")
    blocked = np.arange(t)[None, :] >= lengths[:, None]  # (B, t)
    return blocked[:, None, None, :]  # (B, 1, 1, t): the same keys hidden for every query
    ### END SOLUTION
