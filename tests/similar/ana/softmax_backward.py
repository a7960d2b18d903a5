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
    probs = np.asarray(probabilities)
    grads = np.asarray(upstream)
    if probs.shape != grads.shape:
        raise ValueError("probabilities and upstream need the same shape")
    kind = np.result_type(probs.dtype, grads.dtype, np.float32)
    probs = np.moveaxis(probs.astype(kind), axis, -1)
    grads = np.moveaxis(grads.astype(kind), axis, -1)
    answer = np.zeros(probs.shape, dtype=kind)
    for index in np.ndindex(*probs.shape[:-1]):
        p_row, g_row = probs[index], grads[index]
        size = len(p_row)
        for i in range(size):
            # row i of the Jacobian is p_i * (delta_ij - p_j)
            total = 0.0
            for j in range(size):
                delta = 1.0 if i == j else 0.0
                total += p_row[i] * (delta - p_row[j]) * g_row[j]
            answer[index + (i,)] = total
    return np.moveaxis(answer, -1, axis)
