"""Bonus exercise `gqa`: `repeat_kv` and `GroupedQueryAttention` in PyTorch, against
``F.scaled_dot_product_attention(..., enable_gqa=True)`` and the core multi-head attention.

The torch comparisons run on every available device and at the input's dtype tolerance.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

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
from ..core.plural import counted
from ..core.strategies import (
    FLOAT_DTYPES,
    Seeded,
    allowed_somewhere,
    causal,
    grid_array,
    seeds,
    telling_mask,
)
from ..sandbox.operation_helpers import BadReturn, linears, load_state, plain, seed_cpu
from .mha import MultiHeadAttention, with_weights

EX = Exercise("gqa", functions=("repeat_kv", "GroupedQueryAttention"), framework="torch",
              track="bonus", points=10, order=9,
              # nor the kit's own MultiHeadAttention, which would do the grouped heads' work
              rule=replace(ATTENTION_RULE, siblings=("mha",)),
              title="`repeat_kv(x, n_rep)`, `GroupedQueryAttention(d_model, n_head, n_kv_head, "
                    "bias=False)`")
CONFIGS = ((8, 4, 2, False), (8, 4, 1, True), (6, 3, 3, False), (12, 6, 2, True))


# -- reference ----------------------------------------------------------------------------------
def _supports_enable_gqa() -> bool:
    q, kv = torch.zeros(1, 2, 1, 1), torch.zeros(1, 1, 1, 1)
    try:
        F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
    except (TypeError, RuntimeError):
        return False
    return True


SUPPORTS_ENABLE_GQA = _supports_enable_gqa()


@EX.reference
def gqa_reference(d_model, n_head, n_kv_head, bias, state, x, mask=None, device="cpu") -> dict:
    """y by ``F.scaled_dot_product_attention(..., enable_gqa=True)`` (``repeat_interleave``
    where this torch lacks it) and the weights of every query head, as NumPy."""
    tx = torch.from_numpy(x).to(device)
    s = {key: torch.from_numpy(value).to(device) for key, value in state.items()}
    b, t, _ = x.shape
    d_head = d_model // n_head

    def project(name, heads):  # (B, T, heads * D) -> (B, heads, T, D)
        p = F.linear(tx, s[f"{name}.weight"], s.get(f"{name}.bias"))
        return p.view(b, t, heads, d_head).transpose(1, 2)

    q, k, v = project("wq", n_head), project("wk", n_kv_head), project("wv", n_kv_head)
    allowed = None if mask is None else ~torch.from_numpy(mask).to(device)
    n_rep = n_head // n_kv_head
    if SUPPORTS_ENABLE_GQA:
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)
    else:
        y = F.scaled_dot_product_attention(
            q, k.repeat_interleave(n_rep, 1), v.repeat_interleave(n_rep, 1), attn_mask=allowed
        )
    scores = q @ k.repeat_interleave(n_rep, 1).transpose(-2, -1) / d_head**0.5
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = scores.softmax(dim=-1)
    y = F.linear(y.transpose(1, 2).reshape(b, t, d_model), s["wo.weight"], s.get("wo.bias"))
    return {"y": y.cpu().numpy(), "weights": weights.cpu().numpy()}


# -- worker operations ----------------------------------------------------------------------------
@EX.operation
def gqa_build(module, d_model, n_head, n_kv_head, bias):
    """Build the student's module: its parameter count and its nn.Linear projections."""
    seed_cpu(0)
    built = module.GroupedQueryAttention(d_model, n_head, n_kv_head, bias=bias)
    if not isinstance(built, torch.nn.Module):
        raise BadReturn("GroupedQueryAttention(...) is not a torch.nn.Module")
    return {"count": sum(int(p.numel()) for p in built.parameters()), "linears": linears(built)}


@EX.operation
def gqa_forward(module, d_model, n_head, n_kv_head, bias, state, x, mask=None,
                device="cpu"):
    """The student's module with ``state`` loaded, forward on ``x``: y and the weights."""
    seed_cpu(0)
    built = module.GroupedQueryAttention(d_model, n_head, n_kv_head, bias=bias)
    built = built.to(device=device, dtype=torch.from_numpy(x).dtype)
    load_state(built, state)
    tx = torch.from_numpy(x).to(device)
    with torch.no_grad():
        result = built(tx) if mask is None else built(tx, torch.from_numpy(mask).to(device))
    if not isinstance(result, tuple) or len(result) != 2:
        raise BadReturn("forward must return a tuple (y, weights)")
    return {"y": plain(result[0], "y"), "weights": plain(result[1], "weights")}


# -- strategies ---------------------------------------------------------------------------------
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


# -- checks -------------------------------------------------------------------------------------
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
    return gqa_reference(*case, device=device)


@EX.check(points=1, prop="repeat_kv(x, n_rep) has shape (B, H_kv * n_rep, T, D) and output head "
       "h is input head h // n_rep (each KV head serves a contiguous group).")
@given(b=st.integers(1, 2), h=st.integers(1, 3), t=st.integers(1, 3), n_rep=st.integers(1, 3))
def test_repeat_kv_repeats_each_head_for_its_group(ctx, b, h, t, n_rep):
    x = np.arange(b * h * t * 2, dtype=np.float64).reshape(b, h, t, 2)  # distinct entries
    ctx.show(x=x, n_rep=n_rep, drawn=True)
    expected = torch.from_numpy(x).repeat_interleave(n_rep, dim=1).numpy()
    assert_equal(ctx.student.repeat_kv(x, n_rep), expected, f"repeat_kv(x, {n_rep})")


@EX.check(points=1, prop="wq and wo are Linear(d_model, d_model), wk and wv Linear(d_model, "
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


@EX.check(points=1, prop="The parameter count is 2*d_model**2 + 2*d_model*n_kv_head*d_head "
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
                raise CheckFailed(f"{counted(count, 'parameter')}, expected {expected}")


@EX.check(points=1, prop="Keys and values take 2*n_kv_head*d_head numbers per token: the KV "
       "cache shrinks by n_head / n_kv_head against multi-head attention's 2*d_model.")
def test_kv_cache_per_token_shrinks_by_group_size(ctx):
    for d_model, n_head, n_kv_head, bias in CONFIGS:
        ctx.show(d_model=d_model, n_head=n_head, n_kv_head=n_kv_head, bias=bias)
        built = ctx.student.gqa_build(d_model, n_head, n_kv_head, bias)
        per_token = sum(built["linears"].get(n, {}).get("out", d_model) for n in ("wk", "wv"))
        if per_token * n_head != 2 * d_model * n_kv_head:
            raise CheckFailed(
                f"a token caches {counted(per_token, 'number')} (wk and wv outputs); "
                "multi-head attention "
                f"caches {2 * d_model}, so expected {2 * d_model} * {n_kv_head} / {n_head} = "
                f"{2 * d_model * n_kv_head // n_head}")


@EX.check(points=1, prop="With n_kv_head == n_head, GroupedQueryAttention is MultiHeadAttention "
       "with the same weights.")
@given(case=gqa_case(n_rep=1))
def test_equals_multi_head_attention_when_groups_are_single(ctx, case):
    def mha(case, device):
        module = with_weights(MultiHeadAttention(case.d_model, case.n_head, bias=case.bias),
                              case.state, torch.from_numpy(case.x).dtype, device)
        with torch.no_grad():
            mask = None if case.mask is None else torch.from_numpy(case.mask).to(device)
            y, weights = module(torch.from_numpy(case.x).to(device), mask)
        return {"y": y.cpu().numpy(), "weights": weights.cpu().numpy()}

    compare(ctx, case, mha)


@EX.check(points=1, prop="With n_kv_head == 1 (multi-query attention), every query head "
       "attends over the one shared key/value head.")
@given(case=gqa_case(n_kv_head=1))
def test_multi_query_when_one_kv_head(ctx, case):
    compare(ctx, case, torch_gqa)


@EX.check(points=2, prop="y and per-head weights match F.scaled_dot_product_attention with "
       "enable_gqa=True (the same weights, any mask).")
@given(case=gqa_case(n_kv_head=2, n_rep=2) | gqa_case())
def test_matches_torch_sdpa_enable_gqa(ctx, case):
    compare(ctx, case, torch_gqa)


@EX.check(points=1, prop="n_head not divisible by n_kv_head (or d_model by n_head) raises "
       "ValueError in __init__.")
def test_rejects_indivisible_heads(ctx):
    for d_model, n_head, n_kv_head in ((12, 6, 4), (12, 4, 3), (10, 4, 2)):
        ctx.show(d_model=d_model, n_head=n_head, n_kv_head=n_kv_head, bias=False)
        expect_value_error(
            lambda a=(d_model, n_head, n_kv_head): ctx.student.gqa_build(*a, False),
            f"d_model={d_model}, n_head={n_head}, n_kv_head={n_kv_head}")


def repeated_kv(x, n_rep):
    """Each key/value head repeated ``n_rep`` times in place, by torch; NumPy in, NumPy out."""
    return torch.from_numpy(np.asarray(x)).repeat_interleave(n_rep, dim=1).numpy()


EX.judge_input("repeat_kv", reference=repeated_kv)
EX.judge_input("gqa_forward", label="GroupedQueryAttention's forward",
               reference=gqa_reference)


### BEGIN HIDDEN CHECKS
def gqa_structures(rng):
    """The configurations the visible checks are built on, whatever the course secret, with
    weights, input and mask from ``rng``: one key/value head for all, one per query head, and
    groups of two and three; no mask, the causal mask and another; with and without biases;
    float32 and float64."""
    cases = []
    for dtype, (kv, rep, d_head), bias, (b, t), mask_kind in (
        (np.float32, (1, 3, 2), False, (2, 2), "causal"),
        (np.float64, (2, 1, 1), True, (2, 3), None),
        (np.float32, (3, 2, 1), False, (1, 4), "other"),
        (np.float64, (2, 3, 2), True, (2, 3), "other"),
    ):
        n_head = kv * rep
        d_model = n_head * d_head
        state = {}
        for name, out in (("wq", d_model), ("wk", kv * d_head), ("wv", kv * d_head),
                          ("wo", d_model)):
            state[f"{name}.weight"] = grid_array(rng, dtype, (out, d_model), -1, 1)
            if bias:
                state[f"{name}.bias"] = grid_array(rng, dtype, (out,), -1, 1)
        x = grid_array(rng, dtype, (b, t, d_model), -2, 2)
        mask = None
        if mask_kind == "causal":
            mask = causal(t)
        elif mask_kind == "other":
            mask = telling_mask(rng, (t, t))
        cases.append({"case": GQA(d_model, n_head, kv, bias, state, x, mask)})
    return cases


@EX.check(points=1, hidden=True, cases=gqa_structures,
          prop="GroupedQueryAttention agrees with the answer key.")
@given(case=gqa_case())
def test_gqa_matches_answer_key(ctx, case):
    got, expected = ctx.student.gqa_forward(*case), ctx.key.gqa_forward(*case)
    assert_matches_key(got, expected, dtype=case.x.dtype, what="the forward pass:")
### END HIDDEN CHECKS


# -- misconceptions -----------------------------------------------------------------------------
EX.misconception(
    "gqa-interleave-order",
    mistake="tiles the key/value heads [0, 1, 0, 1] instead of contiguous groups [0, 0, 1, 1]",
    hint="query head h reads key/value head h // n_rep: repeat each key/value head n_rep times "
         "in place (repeat_interleave along the head axis) rather than tiling the whole set.",
)


def tiled_forward(d_model, n_head, n_kv_head, bias, state, x, mask=None,
                  device="cpu") -> dict:
    """Grouped-query attention whose KV heads are tiled [0, 1, 0, 1]: the mistake; y and the
    weights, as ``gqa_reference`` gives them."""
    tx = torch.from_numpy(x).to(device)
    s = {key: torch.from_numpy(value).to(device) for key, value in state.items()}
    b, t, _ = x.shape
    d_head = d_model // n_head

    def project(name, heads):
        p = F.linear(tx, s[f"{name}.weight"], s.get(f"{name}.bias"))
        return p.view(b, t, heads, d_head).transpose(1, 2)

    n_rep = n_head // n_kv_head
    q = project("wq", n_head)
    k, v = (project(n, n_kv_head).repeat(1, n_rep, 1, 1) for n in ("wk", "wv"))
    allowed = None if mask is None else ~torch.from_numpy(mask).to(device)
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    scores = q @ k.transpose(-2, -1) / d_head**0.5
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    y = F.linear(y.transpose(1, 2).reshape(b, t, d_model), s["wo.weight"], s.get("wo.bias"))
    return {"y": y.cpu().numpy(), "weights": scores.softmax(dim=-1).cpu().numpy()}


def tiled(x, n_rep):
    """The key/value heads tiled n_rep times, [0, 1, 0, 1], by torch."""
    return torch.from_numpy(np.asarray(x)).repeat(1, n_rep, 1, 1).numpy()


@EX.probe("gqa-interleave-order",
          explains=("test_repeat_kv_repeats_each_head_for_its_group",
                    "test_matches_torch_sdpa_enable_gqa"),
          mistaken={"repeat_kv": lambda x, n_rep: [tiled(x, n_rep)],
                    "gqa_forward": lambda *args, **kwargs: [tiled_forward(*args, **kwargs)]})
def probe_interleave_order(student) -> bool:
    x = np.arange(2 * 3 * 1 * 2, dtype=np.float64).reshape(2, 3, 1, 2)
    if mistaken(student.repeat_kv(x, 2), repeated_kv(x, 2), tiled(x, 2)):
        return True
    rng = np.random.default_rng(4)
    d_model, n_head, n_kv_head = 8, 4, 2
    state = {"wq.weight": rng.normal(size=(8, 8)) / 2, "wk.weight": rng.normal(size=(4, 8)) / 2,
             "wv.weight": rng.normal(size=(4, 8)) / 2, "wo.weight": rng.normal(size=(8, 8)) / 2}
    x = rng.normal(size=(1, 3, 8))
    got = student.gqa_forward(d_model, n_head, n_kv_head, False, state, x)["y"]
    correct = gqa_reference(d_model, n_head, n_kv_head, False, state, x)["y"]
    return mistaken(got, correct, tiled_forward(d_model, n_head, n_kv_head, False, state, x)["y"])
