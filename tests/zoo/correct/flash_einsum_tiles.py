# zoo: flash
"""Tiles over queries and keys, einsum for the products, the running max floored at the lowest
finite float instead of -inf (so no NaN can arise from -inf - -inf)."""

import math

import numpy as np


def flash_attention(q, k, v, mask=None, block_size=64):
    if type(block_size) is bool or not isinstance(block_size, (int, np.integer)) or block_size <= 0:
        raise ValueError("block_size must be a positive integer")
    q = np.asarray(q)
    k = np.asarray(k)
    v = np.asarray(v)
    work = np.promote_types(np.result_type(q, k, v), np.float32)
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError("shapes do not fit: q, k widths and k, v lengths must agree")
    n_q, n_k = q.shape[-2], k.shape[-2]
    if mask is None:
        mask = np.zeros((1, 1), dtype=bool)
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise ValueError("the mask must be boolean")
    if n_k == 0 or np.broadcast_to(mask, mask.shape[:-2] + (n_q, n_k)).all(-1).any():
        raise ValueError("some query cannot see any key")
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], mask.shape[:-2])
    q = np.broadcast_to(q, lead + q.shape[-2:]).astype(work)
    k = np.broadcast_to(k, lead + k.shape[-2:]).astype(work)
    v = np.broadcast_to(v, lead + v.shape[-2:]).astype(work)
    mask = np.broadcast_to(mask, lead + (n_q, n_k))
    floor = np.finfo(work).min
    out = np.empty(lead + (n_q, v.shape[-1]), dtype=work)
    tile = block_size
    for qs in range(0, n_q, tile):
        qt = q[..., qs:qs + tile, :] / math.sqrt(q.shape[-1])
        best = np.full(qt.shape[:-1], floor, dtype=work)
        total = np.zeros(qt.shape[:-1], dtype=work)
        numer = np.zeros(qt.shape[:-1] + (v.shape[-1],), dtype=work)
        for ks in range(0, n_k, block_size):
            scores = np.einsum("...id,...jd->...ij", qt, k[..., ks:ks + block_size, :])
            scores[mask[..., qs:qs + tile, ks:ks + block_size]] = -np.inf
            grown = np.maximum(best, scores.max(-1))
            factor = np.exp(best - grown)
            weights = np.exp(scores - grown[..., None])
            total = factor * total + weights.sum(-1)
            numer = factor[..., None] * numer + np.einsum("...ij,...jd->...id", weights,
                                                          v[..., ks:ks + block_size, :])
            best = grown
        out[..., qs:qs + tile, :] = numer / total[..., None]
    return out
