"""Bonus exercise `decode`: `KVCache` and `decode_step` in PyTorch, checked against one full
causal forward of the reference `MultiHeadAttention` (at the input's dtype tolerance: float32
inputs at rtol 1e-4, atol 1e-5). The decoding runs on every available device."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from ..core.assertions import (
    CheckFailed,
    assert_close,
    assert_equal,
    assert_matches_key,
    assert_shape,
    expect_value_error,
)
from ..core.delegation import ATTENTION_RULE
from ..core.diagnose import mistaken
from ..core.exercise import Exercise
from ..core.strategies import FLOAT_DTYPES, Seeded, grid_array, seeds
from ..sandbox.operation_helpers import BadReturn, load_state, plain, seed_cpu
from .attention import causal_mask
from .mha import MultiHeadAttention, with_weights

EX = Exercise("decode", functions=("KVCache", "decode_step"), framework="torch", track="bonus",
              points=10, order=10, rule=ATTENTION_RULE, uses=("kv_cache", "mha"),
              # the core module may be built (its layers are what decode_step works with),
              # never run: its forward, answered by the key, would do decode's work
              module_methods=("__init__",),
              title="`KVCache` (`append`, `len`) and `decode_step(mha, x_new, cache)` over the "
                    "core `MultiHeadAttention`")


# -- reference ----------------------------------------------------------------------------------
@EX.reference
def causal_forward(d_model, n_head, bias, state, x, device="cpu") -> np.ndarray:
    """The reference ``MultiHeadAttention`` over the whole of ``x`` with a causal mask."""
    mha = with_weights(MultiHeadAttention(d_model, n_head, bias=bias), state,
                       torch.from_numpy(x).dtype, device)
    with torch.no_grad():
        tx = torch.from_numpy(x).to(device)
        y, _ = mha(tx, torch.from_numpy(causal_mask(x.shape[1])).to(device))
    return y.cpu().numpy()


# -- worker operations ----------------------------------------------------------------------------
@EX.operation
def decode_run(module, d_model, n_head, bias, state, xs, device="cpu"):
    """Feed the chunks ``xs`` (each ``(B, T_i, d_model)``) through the student's
    ``decode_step`` with one ``KVCache``, on the projections of a ``MultiHeadAttention`` with
    ``state`` loaded (what ``decode_step`` may use of the module: not its forward; no module
    of the answer key is built in the worker): ``{"ys", "lengths"}``."""
    seed_cpu(0)
    view = nn.Module()
    view.n_head = n_head
    for name in ("wq", "wk", "wv", "wo"):
        view.add_module(name, nn.Linear(d_model, d_model, bias=bias))
    view = view.to(device=device, dtype=torch.from_numpy(xs[0]).dtype)
    load_state(view, state)
    cache = module.KVCache()
    ys, lengths = [], []
    with torch.no_grad():
        for i, chunk in enumerate(xs):
            y = module.decode_step(view, torch.from_numpy(chunk).to(device), cache)
            if not isinstance(y, torch.Tensor):
                raise BadReturn(f"decode_step returned a {type(y).__name__}, expected a tensor")
            ys.append(plain(y, f"the output of step {i}"))
            lengths.append(int(len(cache)))
    return {"ys": ys, "lengths": lengths}


@EX.operation
def kvcache_run(module, steps):
    """``append`` after ``append`` on one new ``KVCache``; ``steps`` hold ``{"k", "v",
    "device"}`` each: ``[{"len", "k", "v"}, ...]`` (k and v only for cpu and cuda)."""
    cache = module.KVCache()
    replies = []
    for i, step in enumerate(steps):
        device = step.get("device", "cpu")
        k = torch.from_numpy(step["k"]).to(device)
        v = torch.from_numpy(step["v"]).to(device)
        result = cache.append(k, v)
        if not isinstance(result, tuple) or len(result) != 2:
            raise BadReturn(f"append (step {i}) must return a tuple (k_all, v_all)")
        reply = {"len": int(len(cache))}
        if all(isinstance(t, torch.Tensor) and t.device.type in ("cpu", "cuda") for t in result):
            reply["k"] = plain(result[0], f"k_all after append {i}")
            reply["v"] = plain(result[1], f"v_all after append {i}")
        replies.append(reply)
    return replies


# -- strategies ---------------------------------------------------------------------------------
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


# -- checks -------------------------------------------------------------------------------------
def run_decode(ctx, case: Decode, device: str = "cpu") -> dict:
    xs = split_chunks(case.x, case.chunks)
    got = ctx.student.decode_run(case.d_model, case.n_head, case.bias, case.state, xs, device)
    for i, (y, x) in enumerate(zip(got["ys"], xs)):
        assert_shape(y, x.shape, f"the output of decode step {i}")
    return got


def compare_with_full_forward(ctx, case: Decode) -> None:
    for device in ctx.devices:
        expected = causal_forward(case.d_model, case.n_head, case.bias, case.state, case.x,
                                  device)
        got = np.concatenate(run_decode(ctx, case, device)["ys"], axis=1)
        tag = f" on {device}" if device != "cpu" else ""
        assert_close(got, expected, dtype=case.x.dtype,
                     what=f"the decoded outputs{tag} (positions along axis 1)")


def kv_step(rng, b, h, t, d, device="cpu", t_v=None):
    """One append's keys and values, in eighths (short enough to paste back), and its device."""
    return {"k": np.round(rng.normal(size=(b, h, t, d)) * 8) / 8 + 0.0,  # + 0.0: no -0.0
            "v": np.round(rng.normal(size=(b, h, t_v or t, d)) * 8) / 8 + 0.0, "device": device}


@EX.check(points=2, prop="Decoding token by token gives the outputs of one full causal forward.")
@given(case=decode_case(token_by_token=True))
def test_token_by_token_equals_full_causal_forward(ctx, case):
    compare_with_full_forward(ctx, case)


@EX.check(points=2, prop="Decoding in chunks of several tokens gives the outputs of one full "
       "causal forward.")
@given(case=decode_case())
def test_chunks_equal_full_causal_forward(ctx, case):
    compare_with_full_forward(ctx, case)


@EX.check(points=1, prop="After each decode_step, len(cache) is the number of tokens seen.")
@given(case=decode_case(dtypes=(np.float64,)))
def test_cache_length_counts_tokens(ctx, case):
    lengths = run_decode(ctx, case)["lengths"]
    expected = np.cumsum(case.chunks).tolist()
    if lengths != expected:
        raise CheckFailed(f"len(cache) after each step is {lengths}, expected {expected}")


@EX.check(points=1, prop="append(k, v) returns every key and value cached so far, the old "
       "positions first, (B, H, T, D).")
@given(sizes=st.lists(st.integers(1, 3), min_size=1, max_size=3), seed=seeds)
def test_append_returns_everything_in_order(ctx, sizes, seed):
    values = Seeded(seed)
    steps = [{"k": values.array(np.float64, (1, 2, n, 2)),
              "v": values.array(np.float64, (1, 2, n, 2)), "device": "cpu"} for n in sizes]
    ctx.show(steps=steps, drawn=True)
    replies = ctx.student.kvcache_run(steps)
    for i, reply in enumerate(replies):
        for name in ("k", "v"):
            expected = np.concatenate([s[name] for s in steps[: i + 1]], axis=2)
            assert_equal(reply.get(name), expected, f"{name}_all after append {i}")
        if reply["len"] != sum(sizes[: i + 1]):
            raise CheckFailed(f"len(cache) is {reply['len']} after append {i}, expected "
                              f"{sum(sizes[: i + 1])}")


@EX.check(points=1, prop="append with k and v of different lengths raises ValueError.")
def test_rejects_keys_and_values_of_different_lengths(ctx):
    rng = np.random.default_rng(0)
    for steps in ([kv_step(rng, 1, 2, 3, 2, t_v=2)],
                  [kv_step(rng, 1, 2, 1, 2), kv_step(rng, 1, 2, 2, 2, t_v=1)]):
        ctx.show(steps=steps)
        expect_value_error(lambda s=steps: ctx.student.kvcache_run(s),
                           "keys and values with different numbers of positions")


@EX.check(points=1, prop="Decoding a batch of another size with the same cache raises ValueError.")
def test_rejects_cache_of_another_batch(ctx):
    rng = np.random.default_rng(1)
    # values in eighths (+ 0.0: no -0.0): the example shown is short enough to paste back
    state = {f"{n}.weight": np.round(rng.normal(size=(4, 4)) * 4) / 8 + 0.0
             for n in ("wq", "wk", "wv", "wo")}
    xs = [np.round(rng.normal(size=shape) * 8) / 8 + 0.0 for shape in ((2, 2, 4), (1, 1, 4))]
    ctx.show(d_model=4, n_head=2, bias=False, state=state, xs=xs)
    expect_value_error(lambda: ctx.student.decode_run(4, 2, False, state, xs, "cpu"),
                       "a cache filled with a batch of 2, then a batch of 1")


@EX.check(points=1, prop="append on a cache held on another device raises ValueError (the "
       "check uses the 'meta' device, so it runs without a GPU).")
def test_rejects_keys_on_another_device(ctx):
    rng = np.random.default_rng(2)
    steps = [kv_step(rng, 1, 2, 2, 2, "cpu"), kv_step(rng, 1, 2, 1, 2, "meta")]
    ctx.show(steps=steps)
    expect_value_error(lambda: ctx.student.kvcache_run(steps),
                       "a cache on cpu given keys on the meta device")


def decoded(d_model, n_head, bias, state, xs, device="cpu") -> dict:
    """What ``decode_run`` gives for a right ``decode_step``: the full causal forward, cut into
    the chunks, and the cache's length after each."""
    y = causal_forward(d_model, n_head, bias, state, np.concatenate(xs, axis=1), device)
    ends = np.cumsum([x.shape[1] for x in xs])
    return {"ys": [y[:, end - x.shape[1]:end] for x, end in zip(xs, ends)],
            "lengths": [int(end) for end in ends]}


EX.judge_input("decode_run", label="decode_step", reference=decoded)


### BEGIN HIDDEN CHECKS
def decode_structures(rng):
    """The runs the visible checks are built on, whatever the course secret, with weights and
    tokens from ``rng``: the whole sequence in one step, token by token, and chunks of several
    tokens after a cache; one head and several, with and without biases, float32 and
    float64."""
    cases = []
    for dtype, (n_head, d_head), bias, b, chunks in (
        (np.float64, (1, 2), False, 2, (3,)),
        (np.float32, (2, 1), True, 1, (1, 1, 1, 1)),
        (np.float32, (3, 1), False, 1, (1, 2, 2)),
        (np.float64, (2, 2), True, 2, (2, 1, 3)),
    ):
        d_model = n_head * d_head
        state = {}
        for name in ("wq", "wk", "wv", "wo"):
            state[f"{name}.weight"] = grid_array(rng, dtype, (d_model, d_model), -1, 1)
            if bias:
                state[f"{name}.bias"] = grid_array(rng, dtype, (d_model,), -1, 1)
        x = grid_array(rng, dtype, (b, sum(chunks), d_model), -2, 2)
        cases.append({"case": Decode(d_model, n_head, bias, state, x, chunks)})
    return cases


@EX.check(points=1, hidden=True, cases=decode_structures,
          prop="decode_step agrees with the answer key.")
@given(case=decode_case())
def test_decode_matches_answer_key(ctx, case):
    xs = split_chunks(case.x, case.chunks)
    args = (case.d_model, case.n_head, case.bias, case.state, xs)
    got, expected = ctx.student.decode_run(*args), ctx.key.decode_run(*args)
    assert_matches_key(got["ys"], expected["ys"], dtype=case.x.dtype,
                       what="the decoded outputs (one per step)",
                       parts=lambda step: f"the output of step {step}")
### END HIDDEN CHECKS


# -- misconceptions -----------------------------------------------------------------------------
EX.misconception(
    "decode-upper-left",
    mistake="masks the new queries from the top left, as if they were the first positions",
    hint="new query i is position len(cache) + i: mask with kv_cache_mask(n_cached, n_new), so "
         "it sees every cached key and the new keys up to itself.",
)


def upper_left_decode(d_model, n_head, bias, state, xs, device="cpu") -> dict:
    """Decoding with a correct cache but the new queries' mask anchored at the top left: the
    output of each step (what the mistake decides of ``decode_run``'s reply)."""
    dtype = torch.from_numpy(xs[0]).dtype
    mha = with_weights(MultiHeadAttention(d_model, n_head, bias=bias), state, dtype, device)
    keys, values, ys = [], [], []
    d_head = d_model // n_head
    with torch.no_grad():
        for chunk in xs:
            x = torch.from_numpy(chunk).to(device)
            b, t, _ = x.shape

            def split(p, b=b, t=t):  # (B, T, C) -> (B, H, T, D)
                return p.view(b, t, n_head, d_head).transpose(1, 2)

            keys.append(split(mha.wk(x)))
            values.append(split(mha.wv(x)))
            k, v = torch.cat(keys, dim=2), torch.cat(values, dim=2)
            mask = torch.ones(t, k.shape[2], dtype=torch.bool, device=x.device).triu(1)
            y = F.scaled_dot_product_attention(split(mha.wq(x)), k, v, attn_mask=~mask)
            ys.append(mha.wo(y.transpose(1, 2).reshape(b, t, d_model)).cpu().numpy())
    return {"ys": ys}


@EX.probe("decode-upper-left",
          explains=("test_token_by_token_equals_full_causal_forward",
                    "test_chunks_equal_full_causal_forward"),
          mistaken={"decode_run": lambda *args, **kwargs: [upper_left_decode(*args, **kwargs)]})
def probe_upper_left(student) -> bool:
    rng = np.random.default_rng(5)
    d_model, n_head = 4, 2
    state = {f"{n}.weight": rng.normal(size=(4, 4)) / 2 for n in ("wq", "wk", "wv", "wo")}
    x = rng.normal(size=(1, 5, 4))
    xs = [x[:, :2], x[:, 2:5]]
    got = np.concatenate(student.decode_run(d_model, n_head, False, state, xs)["ys"], axis=1)
    correct = causal_forward(d_model, n_head, False, state, x)
    wrong = upper_left_decode(d_model, n_head, False, state, xs)["ys"]
    return mistaken(got, correct, np.concatenate(wrong, axis=1))
