"""Bounded Hypothesis strategies that build valid inputs by construction.

Every case is a NamedTuple, so feedback can print its fields by name. Sizes stay small: a
counterexample is easiest to read with two positions and one head.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

FLOAT_DTYPES = (np.float64, np.float32)


GRID = 8  # values are multiples of 1/8: exact in float32, short to print, shrink towards 0


@functools.lru_cache(maxsize=None)
def _grid(low: float, high: float) -> st.SearchStrategy[float]:
    # Built once per range: Hypothesis validates a new strategy on its first draw.
    return st.integers(int(np.ceil(low * GRID)), int(np.floor(high * GRID))).map(
        lambda i: i / GRID
    )


def floats_array(dtype, shape, low=-10.0, high=10.0):
    return hnp.arrays(dtype, shape, elements=_grid(float(low), float(high)))


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
    blocked = draw(hnp.arrays(np.bool_, x.shape))
    keep = draw(hnp.arrays(np.int64, tuple(int(n) for n in np.delete(x.shape, axis % x.ndim)),
                           elements=st.integers(0, x.shape[axis] - 1)))
    moved = np.moveaxis(blocked, axis, -1)
    np.put_along_axis(moved, keep[..., None], False, axis=-1)
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
    """A random bool mask of ``shape`` (..., Tq, Tk) where every row allows some key."""
    mask = draw(hnp.arrays(np.bool_, shape))
    keep = draw(hnp.arrays(np.int64, shape[:-1], elements=st.integers(0, shape[-1] - 1)))
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
    dtype = draw(st.sampled_from(dtypes))
    n_head, d_head = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    d_model = n_head * d_head
    b, t = draw(st.integers(1, 2)), draw(st.integers(1, max_t))
    use_bias = draw(st.booleans()) if bias is None else bias
    scale = 1.0
    state = {}
    for name in ("wq", "wk", "wv", "wo"):
        state[f"{name}.weight"] = draw(floats_array(dtype, (d_model, d_model), -scale, scale))
        if use_bias:
            state[f"{name}.bias"] = draw(floats_array(dtype, (d_model,), -scale, scale))
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
