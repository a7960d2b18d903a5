# zoo: flash
"""Each block's attention normalised on its own, with its log-sum-exp; blocks merged into the
running (output, log-sum-exp) pair with np.logaddexp, as split-KV decoding merges partial
results."""

import numbers

import numpy as np


def _check(block_size, q, k, v, mask):
    if isinstance(block_size, bool) or not isinstance(block_size, numbers.Integral):
        raise ValueError(f"block_size must be an integer, got {block_size!r}")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("q and k must have the same width")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError("k and v must have the same number of positions")
    if mask is not None and mask.dtype != np.bool_:
        raise ValueError("mask must be a boolean array")


def flash_attention(q, k, v, mask=None, block_size=64):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    mask = None if mask is None else np.asarray(mask)
    _check(block_size, q, k, v, mask)
    dtype = np.result_type(q.dtype, k.dtype, v.dtype, np.float32)
    q = q * dtype.type(1.0 / np.sqrt(q.shape[-1]))
    out = None
    lse = None
    for start in range(0, k.shape[-2], block_size):
        stop = start + block_size
        scores = (q @ np.swapaxes(k[..., start:stop, :], -1, -2)).astype(dtype)
        if mask is not None:
            scores = np.where(mask[..., start:stop], -np.inf, scores)
        peak = scores.max(axis=-1, keepdims=True)
        seen = np.isfinite(peak)
        e = np.exp(scores - np.where(seen, peak, 0))
        block_sum = e.sum(axis=-1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            block_lse = np.where(seen, peak + np.log(block_sum), -np.inf)
            block_out = np.where(seen, (e @ v[..., start:stop, :]) / block_sum, 0)
        if out is None:
            out, lse = block_out, block_lse
            continue
        new_lse = np.logaddexp(lse, block_lse)
        alive = np.isfinite(new_lse)
        keep_old = np.exp(np.where(alive, lse - np.where(alive, new_lse, 0), -np.inf))
        keep_new = np.exp(np.where(alive, block_lse - np.where(alive, new_lse, 0), -np.inf))
        out = keep_old * out + keep_new * block_out
        lse = new_lse
    if lse is None or not np.isfinite(lse).all():
        raise ValueError("a query has no key it may attend to")
    return out.astype(dtype)
