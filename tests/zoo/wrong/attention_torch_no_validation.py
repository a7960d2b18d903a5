"""Exercise `attention`: the causal mask and masked scaled dot-product attention."""

import math
import numbers

import numpy as np
import torch

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
    ### BEGIN SOLUTION
    if isinstance(t, bool) or not isinstance(t, numbers.Integral) or t < 1:
        raise ValueError(f"t must be a positive integer, got {t!r}")
    return np.triu(np.ones((t, t), dtype=bool), k=1)
    ### END SOLUTION


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
    ### BEGIN SOLUTION
    # BUG: q/k widths and k/v lengths are not checked: torch raises RuntimeError, not ValueError
    q, k, v = (torch.as_tensor(np.asarray(a)) for a in (q, k, v))
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)
    if mask is not None:
        mask = torch.as_tensor(np.asarray(mask))
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be boolean (True = blocked), got dtype {mask.dtype}")
        scores = scores.masked_fill(mask, float("-inf"))
    if torch.isneginf(scores).all(dim=-1).any():
        raise ValueError("a query has no allowed key: its whole mask row is True")
    weights = torch.softmax(scores, dim=-1)
    return (weights @ v).numpy(), weights.numpy()
    ### END SOLUTION
