"""Checks for the bonus exercise `gqa`: `repeat_kv` and `GroupedQueryAttention`, against
``F.scaled_dot_product_attention(..., enable_gqa=True)`` and the core multi-head attention.

The torch comparisons run on every available device and at the input's dtype tolerance.
"""

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from .. import reference, reference_bonus
from ..assertions import CheckFailed, assert_close, assert_equal, assert_shape, expect_value_error
from ..registry import check
from ..strategies_bonus import GQA, gqa_case

EX = "gqa"
CONFIGS = ((8, 4, 2, False), (8, 4, 1, True), (6, 3, 3, False), (12, 6, 2, True))


def run_student(ctx, case: GQA, device: str = "cpu") -> dict:
    got = ctx.student.gqa_forward(*case, device=device)
    b, t, c = case.x.shape
    assert_shape(got["y"], (b, t, c), "y")
    if got["weights"].shape == (b, case.n_kv_head, t, t) and case.n_kv_head != case.n_head:
        raise CheckFailed(f"weights have shape {got['weights'].shape}: one map per key/value "
                          f"head; expected one per query head, {(b, case.n_head, t, t)}")
    assert_shape(got["weights"], (b, case.n_head, t, t), "the weights")
    return got


def compare(ctx, case: GQA, expected_for) -> None:
    for device in ctx.devices:
        expected = expected_for(case, device)
        got = run_student(ctx, case, device)
        tag = f" on {device}" if device != "cpu" else ""
        assert_close(got["weights"], expected["weights"], dtype=case.x.dtype,
                     what=f"the weights{tag}")
        assert_close(got["y"], expected["y"], dtype=case.x.dtype, what=f"y{tag}")


def torch_gqa(case: GQA, device: str = "cpu") -> dict:
    return reference_bonus.gqa_forward(*case, device=device)


@check(EX, points=1, prop="repeat_kv(x, n_rep) has shape (B, H_kv * n_rep, T, D) and output head "
       "h is input head h // n_rep (each KV head serves a contiguous group).")
@given(b=st.integers(1, 2), h=st.integers(1, 3), t=st.integers(1, 3), n_rep=st.integers(1, 3))
def test_repeat_kv_repeats_each_head_for_its_group(ctx, b, h, t, n_rep):
    x = np.arange(b * h * t * 2, dtype=np.float64).reshape(b, h, t, 2)  # distinct entries
    expected = torch.from_numpy(x).repeat_interleave(n_rep, dim=1).numpy()
    assert_equal(ctx.student.repeat_kv(x, n_rep), expected, f"repeat_kv(x, {n_rep})")


@check(EX, points=1, prop="wq and wo are Linear(d_model, d_model), wk and wv Linear(d_model, "
       "n_kv_head * d_head), with bias as asked.")
def test_projection_shapes(ctx):
    for d_model, n_head, n_kv_head, bias in CONFIGS:
        ctx.show(d_model=d_model, n_head=n_head, n_kv_head=n_kv_head, bias=bias)
        built = ctx.student.gqa_build(d_model, n_head, n_kv_head, bias)
        kv_width = n_kv_head * (d_model // n_head)
        for name, out in (("wq", d_model), ("wk", kv_width), ("wv", kv_width), ("wo", d_model)):
            layer = built["linears"].get(name)
            if layer is None:
                raise CheckFailed(f"self.{name} is missing or is not an nn.Linear")
            if (layer["in"], layer["out"], layer["bias"]) != (d_model, out, bias):
                raise CheckFailed(
                    f"self.{name} is Linear({layer['in']}, {layer['out']}, bias={layer['bias']})"
                    f", expected Linear({d_model}, {out}, bias={bias})")


@check(EX, points=1, prop="The parameter count is 2*d_model**2 + 2*d_model*n_kv_head*d_head "
       "(plus the biases).")
def test_parameter_count(ctx):
    d_model = 12
    for n_head, n_kv_head in ((6, 6), (6, 3), (6, 2), (6, 1), (4, 2)):
        for bias in (False, True):
            ctx.show(d_model=d_model, n_head=n_head, n_kv_head=n_kv_head, bias=bias)
            kv_width = n_kv_head * (d_model // n_head)
            expected = 2 * d_model**2 + 2 * d_model * kv_width
            expected += (2 * d_model + 2 * kv_width) if bias else 0
            count = ctx.student.gqa_build(d_model, n_head, n_kv_head, bias)["count"]
            if count != expected:
                raise CheckFailed(f"{count} parameters, expected {expected}")


@check(EX, points=1, prop="Keys and values take 2*n_kv_head*d_head numbers per token: the KV "
       "cache shrinks by n_head / n_kv_head against multi-head attention's 2*d_model.")
def test_kv_cache_per_token_shrinks_by_group_size(ctx):
    for d_model, n_head, n_kv_head, bias in CONFIGS:
        ctx.show(d_model=d_model, n_head=n_head, n_kv_head=n_kv_head)
        built = ctx.student.gqa_build(d_model, n_head, n_kv_head, bias)
        per_token = sum(built["linears"].get(n, {}).get("out", d_model) for n in ("wk", "wv"))
        if per_token * n_head != 2 * d_model * n_kv_head:
            raise CheckFailed(
                f"a token caches {per_token} numbers (wk and wv outputs); multi-head attention "
                f"caches {2 * d_model}, so expected {2 * d_model} * {n_kv_head} / {n_head} = "
                f"{2 * d_model * n_kv_head // n_head}")


@check(EX, points=1, prop="With n_kv_head == n_head, GroupedQueryAttention is MultiHeadAttention "
       "with the same weights.")
@given(case=gqa_case(n_rep=1))
def test_equals_multi_head_attention_when_groups_are_single(ctx, case):
    def mha(case, device):
        module = reference.MultiHeadAttention(case.d_model, case.n_head, bias=case.bias)
        module = module.to(device=device, dtype=torch.from_numpy(case.x).dtype)
        with torch.no_grad():
            for key, value in case.state.items():
                layer, param = key.split(".")
                getattr(getattr(module, layer), param).copy_(torch.from_numpy(value))
            mask = None if case.mask is None else torch.from_numpy(case.mask).to(device)
            y, weights = module(torch.from_numpy(case.x).to(device), mask)
        return {"y": y.cpu().numpy(), "weights": weights.cpu().numpy()}

    compare(ctx, case, mha)


@check(EX, points=1, prop="With n_kv_head == 1 (multi-query attention), every query head "
       "attends over the one shared key/value head.")
@given(case=gqa_case(n_kv_head=1))
def test_multi_query_when_one_kv_head(ctx, case):
    compare(ctx, case, torch_gqa)


@check(EX, points=2, prop="y and per-head weights match F.scaled_dot_product_attention with "
       "enable_gqa=True (the same weights, any mask).")
@given(case=gqa_case(n_kv_head=2, n_rep=2) | gqa_case())
def test_matches_torch_sdpa_enable_gqa(ctx, case):
    compare(ctx, case, torch_gqa)


@check(EX, points=1, prop="n_head not divisible by n_kv_head (or d_model by n_head) raises "
       "ValueError in __init__.")
def test_rejects_indivisible_heads(ctx):
    for d_model, n_head, n_kv_head in ((12, 6, 4), (12, 4, 3), (10, 4, 2)):
        ctx.show(d_model=d_model, n_head=n_head, n_kv_head=n_kv_head)
        expect_value_error(
            lambda a=(d_model, n_head, n_kv_head): ctx.student.gqa_build(*a, False),
            f"d_model={d_model}, n_head={n_head}, n_kv_head={n_kv_head}")
