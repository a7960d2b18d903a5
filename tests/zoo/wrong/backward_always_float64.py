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
    ### BEGIN SOLUTION
    p = np.asarray(probabilities)
    g = np.asarray(upstream)
    if p.shape != g.shape:
        raise ValueError(
            f"probabilities {p.shape} and upstream {g.shape} must have the same shape"
        )
    dtype = np.float64  # BUG: always float64, so float32 inputs do not stay float32
    p, g = p.astype(dtype), g.astype(dtype)
    # dL/ds_j = p_j * (g_j - sum_i p_i g_i): the Jacobian diag(p) - p p^T applied to g.
    weighted_mean = np.sum(p * g, axis=axis, keepdims=True)
    return p * (g - weighted_mean)
    ### END SOLUTION
