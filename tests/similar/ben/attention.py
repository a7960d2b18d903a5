"""Exercise `attention`: the causal mask and masked scaled dot-product attention."""

import numpy as np

from .softmax import softmax


def causal_mask(t):
    """The mask that hides the future from each of ``t`` positions.

    Args:
        t: the sequence length, a positive integer.

    Returns:
        np.ndarray of dtype bool and shape ``(t, t)``; entry ``[i, j]`` is True (blocked)
        exactly when ``j > i``. A position always sees itself and everything before it.

    Raises:
        ValueError: if ``t`` is not a positive integer.
    """
    if not isinstance(t, (int, np.integer)) or isinstance(t, (bool, np.bool_)) or t < 1:
        raise ValueError(f"causal_mask needs a positive int, got {t!r}")
    i = np.arange(t)
    return i[None, :] > i[:, None]


def scaled_dot_product_attention(q, k, v, mask=None):
    """Attend from each query to the keys and average the values.

    Args:
        q: array-like ``(..., Tq, d_k)`` queries.
        k: array-like ``(..., Tk, d_k)`` keys.
        v: array-like ``(..., Tk, d_v)`` values.
        mask: optional bool array-like broadcastable to ``(..., Tq, Tk)``; True blocks a
            key for a query. It applies to the scores, before the softmax.

    Returns:
        ``(output, weights)``: output ``(..., Tq, d_v)`` and weights ``(..., Tq, Tk)``, where
        ``weights = softmax(q k^T / sqrt(d_k) with blocked scores at -inf)`` row by row and
        ``output = weights @ v``. float64 inputs give float64; float32 inputs may give
        float32 or float64.

    Raises:
        ValueError: if q and k widths differ, if k and v lengths differ, if the mask is not
            boolean, or if some query has no allowed key.
    """
    q, k, v = map(np.asarray, (q, k, v))
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"d_k mismatch: {q.shape} vs {k.shape}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"Tk mismatch: {k.shape} vs {v.shape}")
    logits = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
    if mask is not None:
        m = np.asarray(mask)
        if m.dtype.kind != "b":
            raise ValueError(f"mask dtype must be bool, got {m.dtype}")
        logits = np.where(m, -np.inf, logits)
    if np.isneginf(logits).all(axis=-1).any():
        raise ValueError("some query is masked from every key")
    w = softmax(logits, axis=-1)
    return np.einsum("...ij,...jd->...id", w, v), w
