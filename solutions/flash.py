"""Bonus exercise `flash`: tiled attention with an online softmax, as in FlashAttention."""

import numbers

import numpy as np


def flash_attention(q, k, v, mask=None, block_size=64):
    """Masked scaled dot-product attention computed block by block of keys, never holding the
    whole ``(Tq, Tk)`` score matrix.

    The keys (and their values) are taken ``block_size`` at a time, in order; the last block
    may be shorter. Each query keeps three running quantities over the blocks seen so far:

        m    its largest score (-inf while every key seen so far is blocked),
        l    the sum of exp(score - m) over those keys,
        acc  the sum of exp(score - m) * value over those keys, a row of width d_v.

    When a block raises the running max from ``m_old`` to ``m_new``, the old ``l`` and
    ``acc`` are rescaled by ``exp(m_old - m_new)`` before the block's terms are added, so all
    terms always share the same shift. After the last block the output is ``acc / l``: the
    same as ``softmax(scores) @ v``, up to rounding, whatever the block size.

    Memory is part of the contract: one call at ``Tq = Tk = 2048``, ``d_k = d_v = 16``,
    ``block_size = 32``, with no mask and with a causal mask, runs in a fresh worker whose peak
    memory the kernel counts: less the kit's share (q, k, v, the mask, the output), it must stay
    under 16 MiB, half of one ``(2048, 2048)`` float64 array. All the file allocates counts (at
    import too): a few block-sized arrays and a bool mask copy fit, the score matrix does not.

    Args:
        q: array-like ``(..., Tq, d_k)`` queries.
        k: array-like ``(..., Tk, d_k)`` keys.
        v: array-like ``(..., Tk, d_v)`` values.
        mask: optional bool array-like broadcastable to ``(..., Tq, Tk)``; True blocks a key
            for a query (as in the core ``attention`` exercise). A blocked key has no
            influence at all on that query's output. A block whose keys are all blocked for
            a query adds nothing to it (and must not produce NaN).
        block_size: how many keys each block holds, a positive integer. The result does not
            depend on it (up to rounding); only the memory does: about ``Tq * block_size``
            scores at a time instead of ``Tq * Tk``.

    Returns:
        np.ndarray ``(..., Tq, d_v)``: the attention output, scores scaled by ``1 / sqrt(d_k)``
        (the weights are not returned). float64 inputs give float64; float32 inputs may give
        float32 or float64 (they are compared at float32 tolerance). This key computes at
        ``np.result_type(q, k, v, np.float32)``, so float32 stays float32.

    Raises:
        ValueError: if ``block_size`` is not a positive integer, if q and k widths differ, if
            k and v lengths differ, if the mask is not boolean, or if some query has no
            allowed key at all.
    """
    ### BEGIN SOLUTION
    if (isinstance(block_size, bool) or not isinstance(block_size, numbers.Integral)
            or block_size < 1):
        raise ValueError(f"block_size must be a positive integer, got {block_size!r}")
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    dtype = np.result_type(q, k, v, np.float32)
    q, k, v = (a.astype(dtype, copy=False) for a in (q, k, v))
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q width {q.shape[-1]} differs from k width {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k has {k.shape[-2]} positions but v has {v.shape[-2]}")
    tq, tk, d_k, d_v = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != np.bool_:
            raise ValueError(f"mask must be boolean (True = blocked), got dtype {mask.dtype}")
        mask = np.broadcast_to(mask, np.broadcast_shapes(mask.shape, (tq, tk)))  # a view
        batch = np.broadcast_shapes(batch, mask.shape[:-2])
    if tk == 0 or (mask is not None and mask.all(axis=-1).any()):
        raise ValueError("a query has no allowed key: its whole mask row is True")
    # A view over the whole batch, so that each block's scores have the mask's batch axes too.
    q = np.broadcast_to(q, (*batch, tq, d_k))
    scale = 1.0 / np.sqrt(d_k)

    # 1. Each query's running state: max score, sum of exponentials, weighted sum of values.
    row_max = np.full((*batch, tq, 1), -np.inf, dtype)
    row_sum = np.zeros((*batch, tq, 1), dtype)
    acc = np.zeros((*batch, tq, d_v), dtype)
    for start in range(0, tk, block_size):
        stop = min(start + block_size, tk)
        # 2. The block's scores, (..., Tq, B): the only score-sized array alive. Updated in
        # place from here on, so that no second one is made.
        s = q @ np.swapaxes(k[..., start:stop, :], -1, -2)
        s *= scale
        if mask is not None:
            np.copyto(s, -np.inf, where=mask[..., start:stop])
        # 3. The new running max stays -inf while every key seen so far is blocked; shifting
        # by 0 then gives exp(-inf - 0) = 0 where exp(-inf - (-inf)) would be NaN.
        new_max = np.maximum(row_max, s.max(axis=-1, keepdims=True))  # (..., Tq, 1)
        shift = np.where(np.isneginf(new_max), 0.0, new_max)
        # 4. Rescale what was summed against the old max (exp(m_old - m_new) <= 1; 0 while
        # nothing was allowed), then add the block's terms.
        rescale = np.exp(row_max - shift)
        s -= shift
        p = np.exp(s, out=s)
        row_sum = row_sum * rescale + p.sum(axis=-1, keepdims=True)
        acc = acc * rescale + p @ v[..., start:stop, :]  # (..., Tq, d_v)
        row_max = new_max
    # 5. Every query has an allowed key, so its sum is at least 1 (its max term is exp(0)).
    return acc / row_sum
    ### END SOLUTION
