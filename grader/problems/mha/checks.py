"""Exercise `mha`: its declaration, reference, worker operations and checks. The cases the
checks draw, and the two answers they compare on one, are ``cases``'s (split from this module).

The torch comparisons run on every available device (CPU, and CUDA when present); a check
passes only if it passes on all of them.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from ...core.assertions import (
    CheckFailed,
    assert_close,
    assert_matches_key,
    expect_value_error,
)
from ...core.delegation import ATTENTION_RULE
from ...core.exercise import Exercise
from ...core.plural import counted
from ...core.strategies import (
    allowed_somewhere,
    causal,
    grid_array,
    telling_mask,
)
from ...sandbox.operation_helpers import (
    BadReturn,
    linears,
    load_state,
    plain,
    run_backward,
    seed_cpu,
)
from ..attention import causal_mask
from .cases import MHA, PROJECTIONS, loaded, mha_case, run_student, torch_reference

EX = Exercise("mha", functions=("MultiHeadAttention",), framework="torch", track="core",
              points=25, order=5, rule=ATTENTION_RULE,
              title="`MultiHeadAttention(d_model, n_head, bias=False)` (PyTorch)")


# -- reference ----------------------------------------------------------------------------------
@EX.reference
class MultiHeadAttention(nn.Module):
    """The exercise's module, computed by ``F.multi_head_attention_forward``."""

    def __init__(self, d_model, n_head, bias=False):
        super().__init__()
        if n_head < 1 or d_model % n_head != 0:
            raise ValueError(f"n_head={n_head} does not divide d_model={d_model}")
        self.n_head = int(n_head)
        self.wq, self.wk, self.wv, self.wo = (
            nn.Linear(d_model, d_model, bias=bias) for _ in range(4)
        )

    def forward(self, x, mask=None):
        batch, length, width = x.shape
        attn_mask = None
        blocked = None if mask is None else torch.as_tensor(mask, device=x.device)
        if blocked is not None:
            if blocked.dtype != torch.bool:
                raise ValueError(f"the mask must be boolean (True = blocked), not {blocked.dtype}")
            full = blocked.expand(batch, self.n_head, length, length)
            if full.all(dim=-1).any():
                raise ValueError("some query has no allowed key (its mask row is all True)")
            attn_mask = full.reshape(batch * self.n_head, length, length)
        in_bias = None
        if self.wq.bias is not None:
            in_bias = torch.cat([self.wq.bias, self.wk.bias, self.wv.bias])
        y, weights = F.multi_head_attention_forward(
            x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1), width, self.n_head,
            None, in_bias, None, None, False, 0.0, self.wo.weight, self.wo.bias,
            training=False, need_weights=True, attn_mask=attn_mask,
            use_separate_proj_weight=True, q_proj_weight=self.wq.weight,
            k_proj_weight=self.wk.weight, v_proj_weight=self.wv.weight,
            average_attn_weights=False,
        )
        return y.transpose(0, 1), weights


def with_weights(module: nn.Module, state: dict[str, np.ndarray], dtype, device="cpu"):
    """``module`` on ``device`` at ``dtype`` with ``state`` copied into its projections."""
    module = module.to(device=device, dtype=dtype)
    with torch.no_grad():
        for key, value in state.items():
            layer, param = key.split(".")
            getattr(getattr(module, layer), param).copy_(torch.from_numpy(value))
    return module


# -- worker operations ----------------------------------------------------------------------------
@EX.operation
def mha_build(module, d_model, n_head, bias):
    """Build the student's module: its parameter count and its nn.Linear projections."""
    seed_cpu(0)
    built = module.MultiHeadAttention(d_model, n_head, bias=bias)
    if not isinstance(built, torch.nn.Module):
        raise BadReturn("MultiHeadAttention(...) is not a torch.nn.Module")
    return {"count": sum(int(p.numel()) for p in built.parameters()), "linears": linears(built)}


@EX.operation
def mha_forward(module, d_model, n_head, bias, state, x, mask=None, grad_y=None, device="cpu",
                skip_missing=False):
    """The student's module with ``state`` loaded, forward on ``x`` (and backward of
    ``grad_y``): y, the weights, and dL/dx and the weights' gradients when asked (None for one
    that no gradient reached).

    A weight of ``state`` that the module lacks or holds in another shape is no error of its
    code: the reply is then ``{"unloaded": {key: "missing" or "shape (..)"}}`` (``loaded``
    says what it lacks), unless ``skip_missing`` and every one is a bias it lacks: then the
    module runs without them, as it was built (for a property that holds whatever the biases).
    A module that lacks a projection's weight never runs on weights of its own."""

    def build():
        seed_cpu(0)
        built = module.MultiHeadAttention(d_model, n_head, bias=bias)
        built = built.to(device=device, dtype=torch.from_numpy(x).dtype)
        unloaded = load_state(built, state, report=True)
        if skip_missing and all(key.endswith(".bias") and why == "missing"
                                for key, why in unloaded.items()):
            unloaded = {}
        return built, unloaded

    def forward(built):
        tx = torch.from_numpy(x).to(device).requires_grad_(grad_y is not None)
        result = built(tx) if mask is None else built(tx, torch.from_numpy(mask).to(device))
        if not isinstance(result, tuple) or len(result) != 2:
            raise BadReturn("forward must return a tuple (y, weights)")
        if not all(isinstance(r, torch.Tensor) for r in result):
            raise BadReturn("forward must return two tensors (y, weights)")
        return tx, result

    built, unloaded = build()
    if unloaded:
        return {"unloaded": unloaded}
    tx, (y, weights) = forward(built)
    reply = {"y": plain(y, "y"), "weights": plain(weights, "weights")}
    if grad_y is not None:
        run_backward(y, torch.from_numpy(grad_y).to(device=y.device, dtype=y.dtype),
                     again=lambda: forward(build()[0])[1][0])
        reply["dx"] = None if tx.grad is None else plain(tx.grad, "dx")
        grads = {}
        for key in state:
            layer_name, param_name = key.split(".")
            grad = getattr(getattr(built, layer_name), param_name).grad
            grads[key] = None if grad is None else plain(grad, key)
        reply["grads"] = grads
    return reply


# -- checks -------------------------------------------------------------------------------------
@EX.check(points=1, prop="wq, wk, wv, wo are nn.Linear(d_model, d_model), with bias as asked.")
def test_has_four_linear_projections(ctx):
    for d_model, n_head, bias in ((6, 2, False), (6, 3, True)):
        ctx.show(d_model=d_model, n_head=n_head, bias=bias)
        built = ctx.student.mha_build(d_model, n_head, bias)
        for name in PROJECTIONS:
            layer = built["linears"].get(name)
            if layer is None:
                raise CheckFailed(f"self.{name} is missing or is not an nn.Linear")
            if (layer["in"], layer["out"], layer["bias"]) != (d_model, d_model, bias):
                raise CheckFailed(
                    f"self.{name} is Linear({layer['in']}, {layer['out']}, bias={layer['bias']}),"
                    f" expected Linear({d_model}, {d_model}, bias={bias})"
                )


@EX.check(points=2, prop="The parameter count is 4*d_model**2 (+4*d_model with bias) for any "
       "head count.")
def test_parameter_count_independent_of_heads(ctx):
    d_model = 12
    for n_head in (1, 2, 3, 4, 6, 12):
        for bias in (False, True):
            ctx.show(d_model=d_model, n_head=n_head, bias=bias)
            count = ctx.student.mha_build(d_model, n_head, bias)["count"]
            expected = 4 * d_model**2 + (4 * d_model if bias else 0)
            if count != expected:
                raise CheckFailed(f"{counted(count, 'parameter')} with n_head={n_head}, "
                                  f"expected {expected}")


@EX.check(points=6, prop="y and per-head weights match nn.MultiheadAttention with the same "
       "weights.")
@given(case=mha_case())
def test_matches_torch_multihead_attention(ctx, case):
    for device in ctx.devices:
        expected = torch_reference(case, device)
        got = run_student(ctx, case, device)
        tag = f" on {device}" if device != "cpu" else ""
        assert_close(got["weights"], expected["weights"], dtype=case.x.dtype,
                     what=f"the weights{tag}")
        assert_close(got["y"], expected["y"], dtype=case.x.dtype, what=f"y{tag}")


@EX.check(points=4, prop="Gradients for x and every weight match nn.MultiheadAttention's.")
@given(case=mha_case(dtypes=(np.float64,)))
def test_gradients_match_torch(ctx, case):
    grad_y = np.cos(np.arange(case.x.size, dtype=np.float64)).reshape(case.x.shape)
    for device in ctx.devices:
        expected = torch_reference(case, device, grad_y)
        got = run_student(ctx, case, device, grad_y)
        for name, want, have in [("x", expected["dx"], got["dx"]),
                                 *((n, g, got["grads"][n]) for n, g in expected["grads"].items())]:
            if have is None:
                raise CheckFailed(f"no gradient reached {name} on {device}: its .grad is None "
                                  "after backward, so autograd never saw it used (left out, or "
                                  "used through .data, .detach() or torch.no_grad())")
            assert_close(have, want, what=f"dL/d{name} on {device}")


@EX.check(points=2, prop="Without a mask, permuting the tokens permutes y and the weights.")
@given(case=mha_case(dtypes=(np.float64,), with_mask=False), data=st.data())
def test_token_permutation_equivariance(ctx, case, data):
    perm = np.array(data.draw(st.permutations(range(case.x.shape[1])), label="perm"))
    base = run_student(ctx, case, skip_missing=True)
    moved = run_student(ctx, case._replace(x=case.x[:, perm]), skip_missing=True)
    assert_close(moved["y"], base["y"][:, perm], what="y for permuted tokens")
    assert_close(moved["weights"], base["weights"][:, :, perm][:, :, :, perm],
                 what="the weights for permuted tokens")


@EX.check(points=2, prop="With a causal mask, changing a later token never changes an earlier "
       "output.")
@given(case=mha_case(dtypes=(np.float64,), with_mask=False), data=st.data())
def test_causal_later_token_never_changes_earlier_output(ctx, case, data):
    t = case.x.shape[1]
    case = case._replace(mask=causal_mask(t))
    ctx.example["case"] = case  # show the input actually used
    position = data.draw(st.integers(0, t - 1), label="changed position")
    changed = case.x.copy()
    changed[:, position] += 1.5
    base = run_student(ctx, case, skip_missing=True)
    after = run_student(ctx, case._replace(x=changed), skip_missing=True)
    assert_close(after["y"][:, :position], base["y"][:, :position],
                 what=f"outputs before position {position}")


@EX.check(points=2, prop="weights has one (T, T) map per head, each row summing to 1.")
@given(case=mha_case())
def test_weights_per_head_rows_sum_to_one(ctx, case):
    got = run_student(ctx, case, skip_missing=True)
    sums = got["weights"].astype(np.float64).sum(-1)
    assert_close(sums, np.ones_like(sums), dtype=case.x.dtype, what="the row sums")


@EX.check(points=2, prop="A (B, H, T, T) mask blocks per head: blocked keys get zero weight, "
       "the allowed ones share the row as they do unmasked.")
@given(case=mha_case(dtypes=(np.float64,), with_mask=False, min_t=2), data=st.data())
def test_per_head_mask_blocks_exactly(ctx, case, data):
    # Judged against the module's own weights under a mask that blocks nothing, not against
    # nn.MultiheadAttention's: a mistake elsewhere (a bias, the scale, the head split, what it
    # does without a mask) cannot fail this check first.
    b, t = case.x.shape[:2]
    mask = allowed_somewhere(data.draw, (b, case.n_head, t, t))
    if not mask.any():
        mask[0, 0, 0, t - 1] = True  # something is blocked (query 0 keeps key 0)
    case = case._replace(mask=mask)
    ctx.example["case"] = case  # show the input actually used
    got = run_student(ctx, case, skip_missing=True)["weights"]
    if (got[mask] != 0).any():
        raise CheckFailed("a blocked key got weight", got=got)
    open_mask = case._replace(mask=np.zeros_like(mask))
    unmasked = run_student(ctx, open_mask, skip_missing=True)["weights"].astype(np.float64)
    kept = np.where(mask, 0.0, unmasked)
    total = kept.sum(-1, keepdims=True)
    if not (total > 0).all():
        raise CheckFailed("with nothing blocked, the keys this mask allows get no weight in some "
                          "row, so the masked row cannot be their weights shared out again",
                          got=unmasked)
    assert_close(got, kept / total, what="the weights (expected: your weights with nothing "
                                         "blocked, the allowed keys' rescaled to sum to 1)")


@EX.check(points=1, prop="d_model not divisible by n_head raises ValueError in __init__.")
def test_rejects_indivisible_d_model(ctx):
    for d_model, n_head in ((6, 4), (5, 2)):
        ctx.show(d_model=d_model, n_head=n_head, bias=False)
        expect_value_error(lambda d=d_model, h=n_head: ctx.student.mha_build(d, h, False),
                           f"d_model={d_model}, n_head={n_head}")


@EX.check(points=1, prop="A query with no allowed key raises ValueError in forward.")
def test_rejects_fully_masked_query(ctx):
    rng = np.random.default_rng(0)
    # values in eighths (+ 0.0: no -0.0): the example shown is short enough to paste back
    state = {f"{n}.weight": np.round(rng.normal(size=(4, 4)) * 4) / 8 + 0.0 for n in PROJECTIONS}
    x = np.round(rng.normal(size=(1, 2, 4)) * 8) / 8 + 0.0
    mask = np.array([[False, True], [True, True]])
    case = MHA(4, 2, False, state, x, mask)
    ctx.show(case=case)
    expect_value_error(
        lambda: loaded(ctx.student.mha_forward(*case), case),
        "mask [[False, True], [True, True]] (query 1 sees nothing)",
    )


EX.judge_input("mha_forward", label="MultiHeadAttention's forward")


### BEGIN HIDDEN CHECKS
def mha_structures(rng):
    """The inputs the visible checks are built on, whatever the course secret, with weights,
    input and mask from ``rng``: one head and several; no mask, the causal mask, another
    (T, T) mask and a (B, H, T, T) one per batch entry and head; with and without biases;
    float32 and float64."""
    cases = []
    for dtype, (n_head, d_head), bias, (b, t), mask_kind in (
        (np.float64, (1, 2), False, (1, 2), None),
        (np.float32, (3, 1), True, (1, 4), "causal"),
        (np.float32, (2, 1), False, (2, 3), "broadcast"),
        (np.float64, (3, 2), True, (2, 4), "per head"),
    ):
        d_model = n_head * d_head
        state = {}
        for name in PROJECTIONS:
            state[f"{name}.weight"] = grid_array(rng, dtype, (d_model, d_model), -1, 1)
            if bias:
                state[f"{name}.bias"] = grid_array(rng, dtype, (d_model,), -1, 1)
        x = grid_array(rng, dtype, (b, t, d_model), -2, 2)
        mask = None
        if mask_kind == "causal":
            mask = causal(t)
        elif mask_kind is not None:
            mask = telling_mask(rng, (t, t) if mask_kind == "broadcast" else (b, n_head, t, t))
        cases.append({"case": MHA(d_model, n_head, bias, state, x, mask)})
    return cases


@EX.check(points=2, hidden=True, cases=mha_structures,
          prop="MultiHeadAttention agrees with the answer key.")
@given(case=mha_case())
def test_mha_matches_answer_key(ctx, case):
    got = loaded(ctx.student.mha_forward(*case), case)
    expected = ctx.key.mha_forward(*case)
    assert_matches_key(got, expected, dtype=case.x.dtype, what="the forward pass:")
### END HIDDEN CHECKS
