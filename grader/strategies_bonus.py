"""Bounded strategies for the bonus exercises, built valid by construction (as in
``grader.strategies``, whose helpers they reuse).

Weights and inputs are drawn from one seed per case (values on the same 1/8 grid as
``floats_array``): Hypothesis then shrinks a few integers (sizes, seed) instead of every array
element, which keeps a failing module-sized case from shrinking for minutes.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from hypothesis import strategies as st

from .strategies import FLOAT_DTYPES, GRID, allowed_somewhere


class Seeded:
    """Arrays on the 1/8 grid from a seeded generator."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def array(self, dtype, shape, low=-3.0, high=3.0) -> np.ndarray:
        ticks = self.rng.integers(int(low * GRID), int(high * GRID) + 1, size=shape)
        return (ticks / GRID).astype(dtype)


seeds = st.integers(0, 2**16)


class Window(NamedTuple):
    t: int
    window: int


windows = st.builds(Window, st.integers(1, 8), st.integers(1, 9))


class Padding(NamedTuple):
    lengths: np.ndarray
    t: int


@st.composite
def padding_case(draw, max_batch=3, max_t=6) -> Padding:
    t = draw(st.integers(1, max_t))
    lengths = draw(st.lists(st.integers(1, t), min_size=1, max_size=max_batch))
    return Padding(np.array(lengths, dtype=np.int64), t)


class AttentionGrad(NamedTuple):
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    grad_output: np.ndarray
    mask: np.ndarray | None


@st.composite
def attention_grad_case(draw, with_mask=None, blocked_key=False, max_t=4) -> AttentionGrad:
    """float64 q, k, v, grad_output with one optional batch axis; ``blocked_key`` makes the
    mask block the last key for every query (there are then at least two keys)."""
    batch = draw(st.sampled_from([(), (1,), (2,)]))
    tq = draw(st.integers(1, max_t))
    tk = draw(st.integers(2 if blocked_key else 1, max_t))
    dk, dv = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    values = Seeded(draw(seeds))
    q = values.array(np.float64, (*batch, tq, dk))
    k = values.array(np.float64, (*batch, tk, dk))
    v = values.array(np.float64, (*batch, tk, dv))
    g = values.array(np.float64, (*batch, tq, dv))
    use_mask = blocked_key or (draw(st.booleans()) if with_mask is None else with_mask)
    mask = None
    if use_mask:
        if blocked_key:
            mask = allowed_somewhere(draw, (tq, tk - 1))
            mask = np.concatenate([mask, np.ones((tq, 1), dtype=bool)], axis=-1)
        else:
            mask = allowed_somewhere(draw, (*batch, tq, tk) if draw(st.booleans()) else (tq, tk))
    return AttentionGrad(q, k, v, g, mask)


class GQA(NamedTuple):
    d_model: int
    n_head: int
    n_kv_head: int
    bias: bool
    state: dict
    x: np.ndarray
    mask: np.ndarray | None


@st.composite
def gqa_case(draw, dtypes=FLOAT_DTYPES, n_kv_head=None, n_rep=None, with_mask=None) -> GQA:
    """A GroupedQueryAttention with ``n_head = n_kv_head * n_rep``, its weights and input."""
    dtype = draw(st.sampled_from(dtypes))
    kv = draw(st.integers(1, 3)) if n_kv_head is None else n_kv_head
    rep = draw(st.integers(1, 3)) if n_rep is None else n_rep
    n_head, d_head = kv * rep, draw(st.integers(1, 2))
    d_model = n_head * d_head
    bias = draw(st.booleans())
    b, t = draw(st.integers(1, 2)), draw(st.integers(1, 4))
    values = Seeded(draw(seeds))
    state = {}
    for name, out in (("wq", d_model), ("wk", kv * d_head), ("wv", kv * d_head), ("wo", d_model)):
        state[f"{name}.weight"] = values.array(dtype, (out, d_model), -1, 1)
        if bias:
            state[f"{name}.bias"] = values.array(dtype, (out,), -1, 1)
    x = values.array(dtype, (b, t, d_model), -2, 2)
    use_mask = draw(st.booleans()) if with_mask is None else with_mask
    mask = allowed_somewhere(draw, (t, t)) if use_mask else None
    return GQA(d_model, n_head, kv, bias, state, x, mask)


class Decode(NamedTuple):
    d_model: int
    n_head: int
    bias: bool
    state: dict
    x: np.ndarray
    chunks: tuple[int, ...]  # how many tokens each decode_step gets; they sum to T


def split_chunks(x: np.ndarray, chunks: tuple[int, ...]) -> list[np.ndarray]:
    starts = np.cumsum((0, *chunks))
    return [x[:, s:e] for s, e in zip(starts[:-1], starts[1:])]


@st.composite
def decode_case(draw, dtypes=FLOAT_DTYPES, token_by_token=False, max_t=6) -> Decode:
    dtype = draw(st.sampled_from(dtypes))
    n_head, d_head = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    d_model = n_head * d_head
    b, t = draw(st.integers(1, 2)), draw(st.integers(1, max_t))
    bias = draw(st.booleans())
    values = Seeded(draw(seeds))
    state = {}
    for name in ("wq", "wk", "wv", "wo"):
        state[f"{name}.weight"] = values.array(dtype, (d_model, d_model), -1, 1)
        if bias:
            state[f"{name}.bias"] = values.array(dtype, (d_model,), -1, 1)
    x = values.array(dtype, (b, t, d_model), -2, 2)
    if token_by_token:
        chunks = (1,) * t
    else:
        cuts = draw(st.sets(st.integers(1, t - 1), max_size=3)) if t > 1 else set()
        edges = [0, *sorted(cuts), t]
        chunks = tuple(int(e - s) for s, e in zip(edges[:-1], edges[1:]))
    return Decode(d_model, n_head, bias, state, x, chunks)
