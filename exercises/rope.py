"""Bonus exercise `rope`: rotary position embeddings (RoFormer's interleaved pairs), in NumPy."""

import math
import numbers

import numpy as np


def rotary_embedding(x, positions, base=10000.0):
    """Rotate each pair of features of ``x`` by an angle proportional to its row's position.

    The RoFormer convention: the features come in neighbouring pairs. At row ``t`` (position
    ``p = positions[t]``), pair ``i`` is ``(a, b) = (x[..., t, 2i], x[..., t, 2i + 1])`` for
    ``i = 0, ..., d/2 - 1``, and it turns by the angle ``p * base ** (-2i / d)``::

        (a, b) -> (a * cos(angle) - b * sin(angle), a * sin(angle) + b * cos(angle))

    Pair 0 turns 1 radian per position; later pairs turn ever more slowly. Every rotation keeps
    the norm, position 0 leaves a row unchanged, and for queries and keys rotated this way the
    score ``rope(q, m) . rope(k, n)`` depends on the offset ``m - n`` only.

    Args:
        x: array-like of real numbers, shape ``(..., T, d)``: any leading axes (batch, heads),
            ``T`` positions, ``d`` features with ``d`` even and at least 2.
        positions: 1-D array-like of ``T`` integers (an integer dtype; negative values allowed),
            the absolute position of each row. A chunk of ``T`` new tokens that follows
            ``n_cached`` cached ones has positions ``n_cached, ..., n_cached + T - 1``.
        base: a positive finite real number that sets the frequencies (default 10000.0).

    Returns:
        np.ndarray of shape ``(..., T, d)``: a float ``x`` keeps its dtype (float32 stays
        float32, float64 stays float64); an integer ``x`` gives float64. ``x`` is not modified.

    Raises:
        ValueError: if ``x`` does not hold real numbers (bool, complex, strings) or has fewer
            than two axes; if ``d`` is odd or 0; if ``positions`` does not have an integer dtype
            (floats and bools are rejected, even whole-valued ones), is not 1-D or its length
            is not ``T``; if ``base`` is not a positive finite real number.
    """
    raise NotImplementedError("rope: not implemented yet")
