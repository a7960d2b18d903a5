"""Exercise `softmax`: a numerically stable softmax in NumPy."""

import numpy as np


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
    raise NotImplementedError("softmax: not implemented yet")
