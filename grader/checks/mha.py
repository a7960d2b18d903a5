"""Checks for the `mha` exercise: `MultiHeadAttention`, against `nn.MultiheadAttention`.

The torch comparisons run on every available device (CPU, and CUDA when present); a check
passes only if it passes on all of them.
"""

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from .. import reference
from ..assertions import CheckFailed, assert_close, assert_shape, expect_value_error
from ..registry import check
from ..strategies import MHA, mha_case

EX = "mha"
PROJECTIONS = ("wq", "wk", "wv", "wo")


def torch_reference(case: MHA, device: str = "cpu", grad_y: np.ndarray | None = None) -> dict:
    """nn.MultiheadAttention with the case's weights copied in, per-head weights."""
    dtype = torch.from_numpy(case.x).dtype
    ref = nn_mha = torch.nn.MultiheadAttention(
        case.d_model, case.n_head, bias=case.bias, batch_first=True, device=device, dtype=dtype
    )
    s = {k: torch.from_numpy(v).to(device) for k, v in case.state.items()}
    with torch.no_grad():
        nn_mha.in_proj_weight.copy_(torch.cat([s["wq.weight"], s["wk.weight"], s["wv.weight"]]))
        nn_mha.out_proj.weight.copy_(s["wo.weight"])
        if case.bias:
            nn_mha.in_proj_bias.copy_(torch.cat([s["wq.bias"], s["wk.bias"], s["wv.bias"]]))
            nn_mha.out_proj.bias.copy_(s["wo.bias"])
    x = torch.from_numpy(case.x).to(device).requires_grad_(grad_y is not None)
    mask = None
    if case.mask is not None:
        b, t = case.x.shape[:2]
        full = torch.from_numpy(case.mask).to(device).expand(b, case.n_head, t, t)
        mask = full.reshape(b * case.n_head, t, t)
    y, weights = ref(x, x, x, attn_mask=mask, need_weights=True, average_attn_weights=False)
    out = {"y": y.detach().cpu().numpy(), "weights": weights.detach().cpu().numpy()}
    if grad_y is not None:
        y.backward(torch.from_numpy(grad_y).to(device))
        out["dx"] = x.grad.cpu().numpy()
        in_grad = nn_mha.in_proj_weight.grad.cpu().numpy()
        gq, gk, gv = in_grad.reshape(3, *case.state["wq.weight"].shape)
        out["grads"] = {"wq.weight": gq, "wk.weight": gk, "wv.weight": gv,
                        "wo.weight": nn_mha.out_proj.weight.grad.cpu().numpy()}
        if case.bias:
            bq, bk, bv = nn_mha.in_proj_bias.grad.cpu().numpy().reshape(3, -1)
            out["grads"].update({"wq.bias": bq, "wk.bias": bk, "wv.bias": bv,
                                 "wo.bias": nn_mha.out_proj.bias.grad.cpu().numpy()})
    return out


def run_student(ctx, case: MHA, device: str = "cpu", grad_y=None) -> dict:
    got = ctx.student.mha_forward(
        case.d_model, case.n_head, case.bias, case.state, case.x, case.mask, grad_y, device
    )
    b, t, c = case.x.shape
    assert_shape(got["y"], (b, t, c), "y")
    if got["weights"].shape == (b, t, t) and case.n_head > 1:
        raise CheckFailed(f"weights have shape {(b, t, t)}: averaged over heads? Expected one "
                          f"map per head, {(b, case.n_head, t, t)}")
    assert_shape(got["weights"], (b, case.n_head, t, t), "the weights")
    return got


@check(EX, points=1, prop="wq, wk, wv, wo are nn.Linear(d_model, d_model), with bias as asked.")
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


@check(EX, points=2, prop="The parameter count is 4*d_model**2 (+4*d_model with bias) for any "
       "head count.")
def test_parameter_count_independent_of_heads(ctx):
    d_model = 12
    for n_head in (1, 2, 3, 4, 6, 12):
        for bias in (False, True):
            ctx.show(d_model=d_model, n_head=n_head, bias=bias)
            count = ctx.student.mha_build(d_model, n_head, bias)["count"]
            expected = 4 * d_model**2 + (4 * d_model if bias else 0)
            if count != expected:
                raise CheckFailed(f"{count} parameters with n_head={n_head}, expected {expected}")


@check(EX, points=6, prop="y and per-head weights match nn.MultiheadAttention with the same "
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


@check(EX, points=4, prop="Gradients for x and every weight match nn.MultiheadAttention's.")
@given(case=mha_case(dtypes=(np.float64,)))
def test_gradients_match_torch(ctx, case):
    grad_y = np.cos(np.arange(case.x.size, dtype=np.float64)).reshape(case.x.shape)
    for device in ctx.devices:
        expected = torch_reference(case, device, grad_y)
        got = run_student(ctx, case, device, grad_y)
        assert_close(got["dx"], expected["dx"], what=f"dL/dx on {device}")
        for name, grad in expected["grads"].items():
            assert_close(got["grads"][name], grad, what=f"dL/d{name} on {device}")


@check(EX, points=2, prop="Without a mask, permuting the tokens permutes y and the weights.")
@given(case=mha_case(dtypes=(np.float64,), with_mask=False), data=st.data())
def test_token_permutation_equivariance(ctx, case, data):
    perm = np.array(data.draw(st.permutations(range(case.x.shape[1])), label="perm"))
    base = run_student(ctx, case)
    moved = run_student(ctx, case._replace(x=case.x[:, perm]))
    assert_close(moved["y"], base["y"][:, perm], what="y for permuted tokens")
    assert_close(moved["weights"], base["weights"][:, :, perm][:, :, :, perm],
                 what="the weights for permuted tokens")


@check(EX, points=2, prop="With a causal mask, changing a later token never changes an earlier "
       "output.")
@given(case=mha_case(dtypes=(np.float64,), with_mask=False), data=st.data())
def test_causal_later_token_never_changes_earlier_output(ctx, case, data):
    t = case.x.shape[1]
    case = case._replace(mask=reference.causal_mask(t))
    ctx.example["case"] = case  # show the input actually used
    position = data.draw(st.integers(0, t - 1), label="changed position")
    changed = case.x.copy()
    changed[:, position] += 1.5
    base = run_student(ctx, case)
    after = run_student(ctx, case._replace(x=changed))
    assert_close(after["y"][:, :position], base["y"][:, :position],
                 what=f"outputs before position {position}")


@check(EX, points=2, prop="weights has one (T, T) map per head, each row summing to 1.")
@given(case=mha_case())
def test_weights_per_head_rows_sum_to_one(ctx, case):
    got = run_student(ctx, case)
    sums = got["weights"].astype(np.float64).sum(-1)
    assert_close(sums, np.ones_like(sums), dtype=case.x.dtype, what="the row sums")


@check(EX, points=2, prop="A (B, H, T, T) mask blocks per head: blocked keys get zero weight.")
@given(case=mha_case(dtypes=(np.float64,), with_mask=True), data=st.data())
def test_per_head_mask_blocks_exactly(ctx, case, data):
    from ..strategies import allowed_somewhere

    b, t = case.x.shape[:2]
    case = case._replace(mask=allowed_somewhere(data.draw, (b, case.n_head, t, t)))
    ctx.example["case"] = case  # show the input actually used
    got = run_student(ctx, case)
    if (got["weights"][case.mask] != 0).any():
        raise CheckFailed("a blocked key got weight", got=got["weights"])
    assert_close(got["weights"], torch_reference(case)["weights"], what="the weights")


@check(EX, points=1, prop="d_model not divisible by n_head raises ValueError in __init__.")
def test_rejects_indivisible_d_model(ctx):
    for d_model, n_head in ((6, 4), (5, 2)):
        ctx.show(d_model=d_model, n_head=n_head)
        expect_value_error(lambda d=d_model, h=n_head: ctx.student.mha_build(d, h, False),
                           f"d_model={d_model}, n_head={n_head}")


@check(EX, points=1, prop="A query with no allowed key raises ValueError in forward.")
def test_rejects_fully_masked_query(ctx):
    rng = np.random.default_rng(0)
    state = {f"{n}.weight": rng.normal(size=(4, 4)) / 2 for n in PROJECTIONS}
    x = rng.normal(size=(1, 2, 4))
    mask = np.array([[False, True], [True, True]])
    ctx.show(x=x, mask=mask)
    expect_value_error(
        lambda: ctx.student.mha_forward(4, 2, False, state, x, mask, None, "cpu"),
        "mask [[False, True], [True, True]] (query 1 sees nothing)",
    )
