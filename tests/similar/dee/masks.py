"""Bonus exercise `masks`: sliding-window masks and padding masks for batches."""

import numbers

import numpy as np


def _positive_integer(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} has to be a positive integer (got {value!r})")


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
    _positive_integer("t", t)
    _positive_integer("window", window)
    too_far = np.tri(t, dtype=bool, k=-window)  # i - j >= window
    future = np.tri(t, dtype=bool).T & ~np.eye(t, dtype=bool)  # j > i
    return too_far | future


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
    _positive_integer("t", t)
    sizes = np.asarray(lengths)
    if sizes.ndim != 1 or not np.issubdtype(sizes.dtype, np.integer):
        raise ValueError(f"lengths has to be a 1-D integer array (got {sizes!r})")
    if sizes.size and not (1 <= sizes.min() and sizes.max() <= t):
        raise ValueError(f"every length has to lie between 1 and {t}")
    keep = np.arange(t) < sizes.reshape(-1, 1, 1, 1)
    return ~keep
