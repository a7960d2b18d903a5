"""Exercise `softmax_backward`: the gradient of a loss through a softmax."""

import numpy as np


def softmax_backward(probabilities, upstream, axis=-1):
    """Back-propagate ``upstream = dL/dp`` through ``p = softmax(logits, axis)``.

    Args:
        probabilities: array-like, ``p = softmax(logits, axis)``, any shape.
        upstream: array-like with the same shape as ``probabilities``: ``dL/dp``.
        axis: the axis the softmax normalised along.

    Returns:
        np.ndarray ``dL/dlogits`` with the shape of ``probabilities`` and dtype
        ``np.result_type(probabilities.dtype, upstream.dtype, np.float32)``. Raising one
        logit lowers every other probability in its slice, so each entry depends on the
        whole slice: the result sums to zero along ``axis``.

    Raises:
        ValueError: if ``probabilities`` and ``upstream`` have different shapes.
    """
    p, g = np.asarray(probabilities), np.asarray(upstream)
    if p.shape != g.shape:
        raise ValueError(f"shapes differ: {p.shape} vs {g.shape}")
    dt = np.result_type(p.dtype, g.dtype, np.float32)
    p_last = np.moveaxis(p.astype(dt), axis, -1)
    g_last = np.moveaxis(g.astype(dt), axis, -1)
    dot = np.einsum("...i,...i->...", p_last, g_last)[..., None]
    return np.moveaxis(p_last * (g_last - dot), -1, axis)
