"""Exercise `softmax_backward`: the gradient of a loss through a softmax."""

from dataclasses import dataclass

import numpy as np


@dataclass
class _Pair:
    """Probabilities and their upstream gradient, checked and in one common dtype."""

    p: np.ndarray
    g: np.ndarray

    @classmethod
    def of(cls, probabilities, upstream):
        p, g = np.asarray(probabilities), np.asarray(upstream)
        if p.shape != g.shape:
            raise ValueError(f"got probabilities of shape {p.shape} but upstream {g.shape}")
        common = np.result_type(p.dtype, g.dtype, np.float32)
        return cls(p.astype(common), g.astype(common))


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
    grads = _Pair.of(probabilities, upstream)
    # The Jacobian-vector product, without building the Jacobian.
    inner = np.sum(grads.p * grads.g, axis=axis, keepdims=True)
    return grads.p * grads.g - grads.p * inner
