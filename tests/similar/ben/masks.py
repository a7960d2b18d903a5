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
    if not all(isinstance(n, numbers.Integral) and not isinstance(n, bool) and n > 0
               for n in (t, window)):
        raise ValueError(f"t and window must be positive ints, got {t!r}, {window!r}")
    offset = np.subtract.outer(np.arange(t), np.arange(t))  # i - j
    return (offset < 0) | (offset >= window)


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
    if not isinstance(t, numbers.Integral) or isinstance(t, bool) or t <= 0:
        raise ValueError(f"t must be a positive int, got {t!r}")
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError(f"lengths must be 1-D integers, got {lengths.dtype} {lengths.shape}")
    if np.any((lengths < 1) | (lengths > t)):
        raise ValueError(f"lengths must lie in [1, {t}]")
    return (np.arange(t) >= lengths[:, None])[:, None, None, :]
