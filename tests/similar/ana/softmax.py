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
    array = np.asarray(logits)
    if array.dtype.kind not in ("b", "i", "u", "f"):
        raise ValueError("softmax only takes real numbers, not " + str(array.dtype))
    result_type = np.result_type(array.dtype, np.float32)
    values = array.astype(result_type)
    if array.dtype.kind in ("i", "u"):
        # every integer must survive the trip to floating point unchanged
        for before, after in zip(array.flat, values.flat):
            if int(before) != int(after):
                raise ValueError("an integer logit cannot be stored exactly as " + str(result_type))
    for number in values.flat:
        if number != number or number == np.inf:
            raise ValueError("NaN and +inf are not valid logits")
    rows = np.moveaxis(values, axis, -1)
    output = np.zeros(rows.shape, dtype=result_type)
    for index in np.ndindex(*rows.shape[:-1]):
        row = rows[index]
        largest = -np.inf
        for entry in row:
            if entry > largest:
                largest = entry
        if largest == -np.inf:
            raise ValueError("this slice is fully masked (or empty)")
        total = 0.0
        for position in range(len(row)):
            output[index + (position,)] = np.exp(row[position] - largest)
            total += output[index + (position,)]
        for position in range(len(row)):
            output[index + (position,)] /= total
    return np.moveaxis(output, -1, axis)
