"""Exercise `mha`'s cases: the module configuration, weights, input and mask a check draws
(``MHA``, ``mha_case``), and the two answers a check compares on one: nn.MultiheadAttention's
(``torch_reference``) and the student's module's, run in its worker (``run_student``,
``loaded``). Split from ``checks``, whose checks draw and compare them.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np
import torch
from hypothesis import strategies as st

from ...core.assertions import CheckFailed, assert_shape
from ...core.strategies import SEEDS, allowed_somewhere, floats_array, seeded_grid

PROJECTIONS = ("wq", "wk", "wv", "wo")


# -- strategies ---------------------------------------------------------------------------------
class MHA(NamedTuple):
    d_model: int
    n_head: int
    bias: bool
    state: dict
    x: np.ndarray
    mask: np.ndarray | None


@st.composite
def mha_case(draw, dtypes=(np.float64, np.float32), with_mask=None, bias=None, min_t=1,
             max_t=4) -> MHA:
    """A module configuration, its weights, an input and maybe a mask.

    The weights come from a drawn seed rather than element by element: four (C, C) matrices
    would make shrinking a failure slow, and the shapes are what shrinks usefully.
    """
    dtype = draw(st.sampled_from(dtypes))
    n_head, d_head = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    d_model = n_head * d_head
    b, t = draw(st.integers(1, 2)), draw(st.integers(min_t, max_t))
    use_bias = draw(st.booleans()) if bias is None else bias
    seed = draw(SEEDS)
    names = [f"{n}.{p}" for n in PROJECTIONS for p in ("weight", "bias")]
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


# -- a case's answers: nn.MultiheadAttention's and the student's ------------------------------
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
        (y * torch.from_numpy(grad_y).to(device)).sum().backward()  # as y.backward(grad_y)
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


UNLOADED = re.compile(r"missing|shape \((\d+, )*\d*,?\)")


def loaded(reply, case: MHA):
    """``mha_forward``'s reply, once the case's weights were loaded into the student's module;
    where they could not be, a failure that says what the module lacks (its code raised
    nothing: "your code raised" would not be true)."""
    unloaded = reply.get("unloaded") if isinstance(reply, dict) else None
    if unloaded is None:
        return reply
    built = f"MultiHeadAttention({case.d_model}, {case.n_head}, bias={case.bias})"
    if not (isinstance(unloaded, dict) and unloaded and set(unloaded) <= set(case.state)
            and all(isinstance(v, str) and UNLOADED.fullmatch(v) for v in unloaded.values())):
        raise CheckFailed(f"the weights of this example could not be loaded into {built}")
    lacks = [key for key in case.state if unloaded.get(key) == "missing"]
    shaped = [f"{key} {unloaded[key][len('shape '):]} for {case.state[key].shape}"
              for key in case.state if unloaded.get(key, "missing") != "missing"]
    missing = ", ".join(lacks[:-1]) + " or " * (len(lacks) > 1) + "".join(lacks[-1:])
    has = " and ".join(([f"no {missing}"] if lacks else []) + (
        [f"weights of other shapes than this example's ({', '.join(shaped)})"] if shaped else []))
    raise CheckFailed(f"{built} has {has}, so this example's weights cannot be loaded into it")


def run_student(ctx, case: MHA, device: str = "cpu", grad_y=None, *,
                skip_missing: bool = False) -> dict:
    """The student's module on ``case``; ``skip_missing``: a property check, which a bias the
    module lacks cannot break (it runs without it)."""
    got = loaded(ctx.student.mha_forward(case.d_model, case.n_head, case.bias, case.state,
                                         case.x, case.mask, grad_y, device, skip_missing), case)
    b, t, c = case.x.shape
    assert_shape(got["y"], (b, t, c), "y")
    if got["weights"].shape == (b, t, t) and case.n_head > 1:
        raise CheckFailed(f"weights have shape {(b, t, t)}: averaged over heads? Expected one "
                          f"map per head, {(b, case.n_head, t, t)}")
    assert_shape(got["weights"], (b, case.n_head, t, t), "the weights")
    return got
