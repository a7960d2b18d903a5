"""Checks for the bonus exercise `decode`: `KVCache` and `decode_step`, against one full causal
forward of the reference `MultiHeadAttention` (at the input's dtype tolerance: float32 inputs
at rtol 1e-4, atol 1e-5). The decoding runs on every available device."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from .. import reference_bonus
from ..assertions import CheckFailed, assert_close, assert_equal, assert_shape, expect_value_error
from ..registry import check
from ..strategies_bonus import Decode, Seeded, decode_case, seeds, split_chunks

EX = "decode"


def run_decode(ctx, case: Decode, device: str = "cpu") -> dict:
    xs = split_chunks(case.x, case.chunks)
    got = ctx.student.decode_run(case.d_model, case.n_head, case.bias, case.state, xs, device)
    for i, (y, x) in enumerate(zip(got["ys"], xs)):
        assert_shape(y, x.shape, f"the output of decode step {i}")
    return got


def compare_with_full_forward(ctx, case: Decode) -> None:
    for device in ctx.devices:
        expected = reference_bonus.causal_forward(
            case.d_model, case.n_head, case.bias, case.state, case.x, device)
        got = np.concatenate(run_decode(ctx, case, device)["ys"], axis=1)
        tag = f" on {device}" if device != "cpu" else ""
        assert_close(got, expected, dtype=case.x.dtype,
                     what=f"the decoded outputs{tag} (positions along axis 1)")


def kv_step(rng, b, h, t, d, device="cpu", t_v=None):
    return {"k": rng.normal(size=(b, h, t, d)), "v": rng.normal(size=(b, h, t_v or t, d)),
            "device": device}


@check(EX, points=2, prop="Decoding token by token gives the outputs of one full causal forward.")
@given(case=decode_case(token_by_token=True))
def test_token_by_token_equals_full_causal_forward(ctx, case):
    compare_with_full_forward(ctx, case)


@check(EX, points=2, prop="Decoding in chunks of several tokens gives the outputs of one full "
       "causal forward.")
@given(case=decode_case())
def test_chunks_equal_full_causal_forward(ctx, case):
    compare_with_full_forward(ctx, case)


@check(EX, points=1, prop="After each decode_step, len(cache) is the number of tokens seen.")
@given(case=decode_case(dtypes=(np.float64,)))
def test_cache_length_counts_tokens(ctx, case):
    lengths = run_decode(ctx, case)["lengths"]
    expected = np.cumsum(case.chunks).tolist()
    if lengths != expected:
        raise CheckFailed(f"len(cache) after each step is {lengths}, expected {expected}")


@check(EX, points=1, prop="append(k, v) returns every key and value cached so far, the old "
       "positions first, (B, H, T, D).")
@given(sizes=st.lists(st.integers(1, 3), min_size=1, max_size=3), seed=seeds)
def test_append_returns_everything_in_order(ctx, sizes, seed):
    values = Seeded(seed)
    steps = [{"k": values.array(np.float64, (1, 2, n, 2)),
              "v": values.array(np.float64, (1, 2, n, 2)), "device": "cpu"} for n in sizes]
    replies = ctx.student.kvcache_run(steps)
    for i, reply in enumerate(replies):
        for name in ("k", "v"):
            expected = np.concatenate([s[name] for s in steps[: i + 1]], axis=2)
            assert_equal(reply.get(name), expected, f"{name}_all after append {i}")
        if reply["len"] != sum(sizes[: i + 1]):
            raise CheckFailed(f"len(cache) is {reply['len']} after append {i}, expected "
                              f"{sum(sizes[: i + 1])}")


@check(EX, points=1, prop="append with k and v of different lengths raises ValueError.")
def test_rejects_keys_and_values_of_different_lengths(ctx):
    rng = np.random.default_rng(0)
    for steps in ([kv_step(rng, 1, 2, 3, 2, t_v=2)],
                  [kv_step(rng, 1, 2, 1, 2), kv_step(rng, 1, 2, 2, 2, t_v=1)]):
        ctx.show(lengths=[(s["k"].shape[2], s["v"].shape[2]) for s in steps])
        expect_value_error(lambda s=steps: ctx.student.kvcache_run(s),
                           "keys and values with different numbers of positions")


@check(EX, points=1, prop="Decoding a batch of another size with the same cache raises ValueError.")
def test_rejects_cache_of_another_batch(ctx):
    rng = np.random.default_rng(1)
    state = {f"{n}.weight": rng.normal(size=(4, 4)) / 2 for n in ("wq", "wk", "wv", "wo")}
    xs = [rng.normal(size=(2, 2, 4)), rng.normal(size=(1, 1, 4))]
    ctx.show(batch_sizes=[2, 1])
    expect_value_error(lambda: ctx.student.decode_run(4, 2, False, state, xs, "cpu"),
                       "a cache filled with a batch of 2, then a batch of 1")


@check(EX, points=1, prop="append on a cache held on another device raises ValueError (the "
       "check uses the 'meta' device, so it runs without a GPU).")
def test_rejects_keys_on_another_device(ctx):
    rng = np.random.default_rng(2)
    steps = [kv_step(rng, 1, 2, 2, 2, "cpu"), kv_step(rng, 1, 2, 1, 2, "meta")]
    ctx.show(devices=["cpu", "meta"])
    expect_value_error(lambda: ctx.student.kvcache_run(steps),
                       "a cache on cpu given keys on the meta device")
