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
    raise NotImplementedError("flash: not implemented yet")
