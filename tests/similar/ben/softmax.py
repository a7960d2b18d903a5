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
    x = np.asarray(logits)
    if not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_) or np.iscomplexobj(x):
        raise ValueError(f"expected real logits, got {x.dtype}")
    out_dtype = np.promote_types(x.dtype, np.float32)
    z = x.astype(out_dtype)
    if np.issubdtype(x.dtype, np.integer) and not np.all(x.astype(object) == z.astype(object)):
        raise ValueError(f"integer logits do not fit {out_dtype} exactly")
    if np.isnan(z).any() or np.isposinf(z).any():
        raise ValueError("NaN/+inf logits are not allowed")
    zt = np.moveaxis(z, axis, -1)
    if zt.shape[-1] == 0:
        raise ValueError("cannot take a softmax over an empty axis")
    m = zt.max(axis=-1)[..., None]
    if np.isneginf(m).any():
        raise ValueError("a slice is entirely -inf")
    e = np.exp(zt - m)
    s = np.einsum("...i->...", e)[..., None]
    return np.moveaxis(e / s, -1, axis)
