"""Bounded Hypothesis strategies shared by several exercises, building valid inputs by
construction. An exercise's own strategies live in its module.

Every case is a NamedTuple, so feedback can print its fields by name. Sizes stay small: a
counterexample is easiest to read with two positions and one head. Arrays are drawn as a seed
and filled from it (values on a 1/8 grid): Hypothesis then shrinks a few integers instead of
every element, which keeps shrinking a failure to well under a second.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

FLOAT_DTYPES = (np.float64, np.float32)


GRID = 8  # values are multiples of 1/8: exact in float32 and short to print
SEEDS = st.integers(0, 2**16 - 1)
# 0 (what a failure shrinks to) gives the plain case: zeros, or nothing masked.
PLAIN_OR_RANDOM = st.integers(0, 7)


def seeded_grid(seed: int, shape: tuple[int, ...], low: float, high: float) -> np.ndarray:
    """Values on the 1/8 grid in [low, high] from a seeded generator."""
    rng = np.random.default_rng(seed)
    return rng.integers(int(np.ceil(low * GRID)), int(np.floor(high * GRID)), size=shape,
                        endpoint=True) / GRID


@st.composite
def floats_array(draw, dtype, shape, low=-10.0, high=10.0) -> np.ndarray:
    """Zeros, or grid values from a drawn seed.

    Two choices per array, whatever its size. Hypothesis regenerates a whole case for every
    shrinking attempt, and drawing elements one by one made shrinking a failure take minutes;
    this way the shapes shrink, and the values shrink to zeros where zeros still fail.
    """
    if draw(PLAIN_OR_RANDOM) == 0:
        return np.zeros(shape, dtype)
    return seeded_grid(draw(SEEDS), shape, low, high).astype(dtype)


class Logits(NamedTuple):
    logits: np.ndarray
    axis: int


@st.composite
def logits_and_axis(draw, dtypes=FLOAT_DTYPES, low=-10.0, high=10.0, max_dims=3) -> Logits:
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=max_dims, min_side=1, max_side=4))
    logits = draw(floats_array(dtype, shape, low, high))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    return Logits(logits, axis)


class Attention(NamedTuple):
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    mask: np.ndarray | None


def allowed_somewhere(draw, shape) -> np.ndarray:
    """A bool mask of ``shape`` (..., Tq, Tk) where every row allows at least one key."""
    if draw(PLAIN_OR_RANDOM) == 0:
        return np.zeros(shape, np.bool_)
    rng = np.random.default_rng(draw(SEEDS))
    mask = rng.random(shape) < 0.5
    keep = rng.integers(0, shape[-1], size=shape[:-1])
    np.put_along_axis(mask, keep[..., None], False, axis=-1)
    return mask


@st.composite
def attention_case(draw, dtypes=FLOAT_DTYPES, with_mask=None, max_batch_dims=2) -> Attention:
    dtype = draw(st.sampled_from(dtypes))
    batch = draw(hnp.array_shapes(min_dims=0, max_dims=max_batch_dims, min_side=1, max_side=2))
    tq, tk, dk, dv = (draw(st.integers(1, n)) for n in (4, 4, 3, 3))
    q = draw(floats_array(dtype, (*batch, tq, dk), -3, 3))
    k = draw(floats_array(dtype, (*batch, tk, dk), -3, 3))
    v = draw(floats_array(dtype, (*batch, tk, dv), -3, 3))
    use_mask = draw(st.booleans()) if with_mask is None else with_mask
    mask = None
    if use_mask:
        full = draw(st.booleans())
        mask = allowed_somewhere(draw, (*batch, tq, tk) if full else (tq, tk))
    return Attention(q, k, v, mask)


class Seeded:
    """Arrays on the 1/8 grid from one seeded generator (for cases with many arrays)."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def array(self, dtype, shape, low=-3.0, high=3.0) -> np.ndarray:
        ticks = self.rng.integers(int(low * GRID), int(high * GRID) + 1, size=shape)
        return (ticks / GRID).astype(dtype)


seeds = st.integers(0, 2**16)


# -- fixed cases --------------------------------------------------------------------------------
# A check's fixed cases (``Check.cases``) pin the structure of an input (its shapes, dtype, the
# kind of mask) and take only its values from a seeded generator; these build the values.
def grid_array(rng: np.random.Generator, dtype, shape: tuple[int, ...], low: float = -3.0,
               high: float = 3.0) -> np.ndarray:
    """Values on the 1/8 grid in [low, high] from ``rng``."""
    ticks = rng.integers(int(np.ceil(low * GRID)), int(np.floor(high * GRID)), size=shape,
                         endpoint=True)
    return (ticks / GRID).astype(dtype)


def telling_mask(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """A bool mask of ``shape`` (..., Tq, Tk), Tk >= 2, that shows how it was read: every row
    allows a key, every (Tq, Tk) slice blocks one at least, and no two slices are alike (a
    code that reads the first slice for all, or broadcasts it the wrong way, gives other
    weights)."""
    *batch, tq, tk = shape
    count = int(np.prod(batch, dtype=np.int64))
    if tk < 2 or count > (2**tk - 1) ** tq - 1:
        raise ValueError(f"no mask of shape {shape} has {count} distinct slices")
    slices: list[np.ndarray] = []
    while len(slices) < count:
        mask = rng.random((tq, tk)) < 0.5
        mask[np.arange(tq), rng.integers(0, tk, size=tq)] = False  # every row keeps a key
        if mask.any() and not any(np.array_equal(mask, s) for s in slices):
            slices.append(mask)
    return np.array(slices).reshape(shape)


def causal(t: int) -> np.ndarray:
    """The (t, t) causal mask: [i, j] is True (blocked) iff j > i."""
    return np.triu(np.ones((t, t), dtype=np.bool_), k=1)
