"""Bounded Hypothesis strategies that build valid inputs by construction.

Every case is a NamedTuple, so feedback can print its fields by name. Sizes stay small: a
counterexample is easiest to read with two positions and one head.
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


@st.composite
def masked_logits(draw) -> Logits:
    """Logits with some -inf entries, never a whole slice of them."""
    case = draw(logits_and_axis(dtypes=(np.float64,)))
    x, axis = case
    moved_shape = np.moveaxis(x, axis, -1).shape
    blocked = np.moveaxis(allowed_somewhere(draw, moved_shape), -1, axis)
    return Logits(np.where(blocked, -np.inf, x), axis)


class Backward(NamedTuple):
    probabilities: np.ndarray
    upstream: np.ndarray
    axis: int


@st.composite
def backward_case(draw, dtypes=(np.float64,)) -> Backward:
    from . import reference

    logits, axis = draw(logits_and_axis(dtypes=dtypes, low=-4, high=4))
    upstream = draw(floats_array(logits.dtype, logits.shape, -3, 3))
    return Backward(reference.softmax(logits, axis), upstream, axis)


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


class Heads(NamedTuple):
    x: np.ndarray
    n_head: int


@st.composite
def heads_case(draw) -> Heads:
    b, t = draw(st.integers(1, 2)), draw(st.integers(1, 4))
    n_head, d_head = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    # Distinct entries, so any misplaced element shows.
    x = np.arange(b * t * n_head * d_head, dtype=np.float64).reshape(b, t, n_head * d_head)
    return Heads(x, n_head)


class MHA(NamedTuple):
    d_model: int
    n_head: int
    bias: bool
    state: dict
    x: np.ndarray
    mask: np.ndarray | None


@st.composite
def mha_case(draw, dtypes=FLOAT_DTYPES, with_mask=None, bias=None, max_t=4) -> MHA:
    """A module configuration, its weights, an input and maybe a mask.

    The weights come from a drawn seed rather than element by element: four (C, C) matrices
    would make shrinking a failure slow, and the shapes are what shrinks usefully.
    """
    dtype = draw(st.sampled_from(dtypes))
    n_head, d_head = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    d_model = n_head * d_head
    b, t = draw(st.integers(1, 2)), draw(st.integers(1, max_t))
    use_bias = draw(st.booleans()) if bias is None else bias
    seed = draw(SEEDS)
    names = [f"{n}.{p}" for n in ("wq", "wk", "wv", "wo") for p in ("weight", "bias")]
    state = {}
    for i, name in enumerate(names):
        if name.endswith("weight") or use_bias:
            shape = (d_model, d_model) if name.endswith("weight") else (d_model,)
            state[name] = seeded_grid(seed + i, shape, -1, 1).astype(dtype)
    x = draw(floats_array(dtype, (b, t, d_model), -2, 2))
    use_mask = draw(st.booleans()) if with_mask is None else with_mask
    mask = None
    if use_mask:
        per_head = draw(st.booleans())
        mask = allowed_somewhere(draw, (b, n_head, t, t) if per_head else (t, t))
    return MHA(d_model, n_head, use_bias, state, x, mask)


class KV(NamedTuple):
    n_cached: int
    n_new: int


kv_sizes = st.builds(KV, st.integers(0, 6), st.integers(1, 5))
