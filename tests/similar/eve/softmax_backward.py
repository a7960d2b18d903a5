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
    probabilities = np.asarray(probabilities)
    upstream = np.asarray(upstream)
    if probabilities.shape != upstream.shape:
        raise ValueError("probabilities and upstream have different shapes")
    dtype = np.result_type(probabilities.dtype, upstream.dtype, np.float32)
    p = probabilities.astype(dtype)
    upstream = upstream.astype(dtype)
    return p * (upstream - (p * upstream).sum(axis=axis, keepdims=True))
