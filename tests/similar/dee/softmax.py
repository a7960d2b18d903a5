"""Exercise `softmax`: a numerically stable softmax in NumPy."""

import numpy as np


def _real_array(data):
    """``data`` as an array of bools, integers or floats; anything else is refused."""
    array = np.asarray(data)
    if not (array.dtype == np.bool_ or np.issubdtype(array.dtype, np.integer)
            or np.issubdtype(array.dtype, np.floating)):
        raise ValueError(f"softmax is defined for real numbers, not {array.dtype}")
    return array


def _require_exact(original, converted):
    """Integers that the floating-point type would round are refused."""
    if not np.issubdtype(original.dtype, np.integer):
        return
    for whole, real in zip(original.ravel().tolist(), converted.ravel().tolist()):
        if whole != real:
            raise ValueError(f"the integer {whole} has no exact {converted.dtype} value")


def softmax(logits, axis=-1):
    """Turn real scores into probabilities along one axis.

    Args:
        logits: array-like of real numbers, any shape. ``-inf`` marks a masked entry.
        axis: the axis to normalise along; negative values count from the end.

    Returns:
        np.ndarray with the shape of ``logits`` and dtype
        ``np.result_type(logits.dtype, np.float32)`` (float32 stays float32, float64 stays
        float64, integers compute in float64). Every slice along ``axis`` is non-negative and
        sums to 1, and ``-inf`` entries get exactly 0.

    Raises:
        ValueError: if the dtype is not real (complex, string, object); if any entry is NaN
            or ``+inf``; if a slice along ``axis`` has no entry above ``-inf`` (an empty axis
            included); if integer logits are not exactly representable in the result dtype.
    """
    values = _real_array(logits)
    dtype = np.result_type(values.dtype, np.float32)
    floats = values.astype(dtype)
    _require_exact(values, floats)
    if not np.all(np.isfinite(floats) | (floats == -np.inf)):
        raise ValueError("logits may hold finite numbers and -inf only")
    peak = np.max(floats, axis=axis, keepdims=True, initial=-np.inf)
    if np.any(peak == -np.inf):
        raise ValueError("softmax is undefined on a slice without a finite entry")
    log_total = peak + np.log(np.sum(np.exp(floats - peak), axis=axis, keepdims=True))
    return np.exp(floats - log_total)
