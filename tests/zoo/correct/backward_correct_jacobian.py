# zoo: attention_backward
"""Zoo (correct): the softmax Jacobian built explicitly, gradients contracted with einsum."""

import numpy as np


def attention_backward(q, k, v, grad_output, mask=None):
    q, k, v, g = (np.asarray(a, dtype=np.float64) for a in (q, k, v, grad_output))
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError("q, k, v do not fit together")
    if g.shape != q.shape[:-1] + v.shape[-1:]:
        raise ValueError(f"grad_output {g.shape} does not match the output")
    scale = q.shape[-1] ** -0.5
    scores = np.einsum("...id,...jd->...ij", q, k) * scale
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != bool:
            raise ValueError("mask must be boolean")
        scores = np.where(mask, -np.inf, scores)
    if np.isneginf(scores).all(axis=-1).any():
        raise ValueError("a query has no allowed key")
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    dv = np.einsum("...ij,...io->...jo", p, g)
    dp = np.einsum("...io,...jo->...ij", g, v)
    n = p.shape[-1]
    jacobian = p[..., :, None] * np.eye(n) - p[..., :, None] * p[..., None, :]  # dp_a/ds_b
    ds = np.einsum("...ia,...iab->...ib", dp, jacobian)
    dq = np.einsum("...ij,...jd->...id", ds, k) * scale
    dk = np.einsum("...ij,...id->...jd", ds, q) * scale
    return dq, dk, dv
