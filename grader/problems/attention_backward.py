"""Bonus exercise `attention_backward`: dq, dk, dv of masked attention by hand, in NumPy.

Checked against torch autograd and finite differences, all in float64: at float64 tolerance
(rtol 1e-7, atol 1e-9) against autograd; finite differences (central, step 1e-6) at rtol 1e-5,
atol 1e-6.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from ..core.assertions import (
    CheckFailed,
    assert_close,
    assert_matches_key,
    assert_shape,
    expect_value_error,
)
from ..core.diagnose import matches
from ..core.exercise import Exercise
from ..core.strategies import Seeded, allowed_somewhere, causal, grid_array, seeds, telling_mask
from .attention import causal_mask, scaled_dot_product_attention

EX = Exercise("attention_backward", functions=("attention_backward",), framework="numpy",
              track="bonus", points=10, order=8, uses=("softmax", "softmax_backward"),
              title="`attention_backward(q, k, v, grad_output, mask=None) -> (dq, dk, dv)` in "
                    "NumPy")
NAMES = ("dq", "dk", "dv")
STEP, FD_RTOL, FD_ATOL = 1e-6, 1e-5, 1e-6


# -- reference ----------------------------------------------------------------------------------
@EX.reference
def attention_grads(q, k, v, grad_output, mask=None):
    """(dq, dk, dv) of ``sum(grad_output * attention(q, k, v, mask))`` by torch autograd."""
    tq, tk, tv = (torch.tensor(np.asarray(a), requires_grad=True) for a in (q, k, v))
    out, _ = scaled_dot_product_attention(
        tq, tk, tv, None if mask is None else torch.as_tensor(np.asarray(mask)))
    # as out.backward(grad_output), bit for bit, without the import that costs
    (out * torch.as_tensor(np.asarray(grad_output), dtype=out.dtype)).sum().backward()
    return tuple(t.grad.numpy() for t in (tq, tk, tv))


# -- strategies ---------------------------------------------------------------------------------
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


# -- checks -------------------------------------------------------------------------------------
def student_grads(ctx, case: AttentionGrad) -> tuple[np.ndarray, ...]:
    got = ctx.student.attention_backward(*case)
    if not isinstance(got, tuple) or len(got) != 3:
        raise CheckFailed("attention_backward must return a tuple (dq, dk, dv)")
    for name, grad, like in zip(NAMES, got, case[:3]):
        assert_shape(grad, like.shape, name)
    return got


def numerical_grads(case: AttentionGrad) -> list[np.ndarray]:
    """Central differences of L = sum(grad_output * output) for every entry of q, k, v."""
    def loss(q, k, v):
        out, _ = scaled_dot_product_attention(q, k, v, case.mask)
        return float(np.sum(case.grad_output * out))

    inputs = [case.q.copy(), case.k.copy(), case.v.copy()]
    grads = []
    for array in inputs:
        grad = np.zeros_like(array)
        for index in np.ndindex(array.shape):
            saved = array[index]
            array[index] = saved + STEP
            up = loss(*inputs)
            array[index] = saved - STEP
            down = loss(*inputs)
            array[index] = saved
            grad[index] = (up - down) / (2 * STEP)
        grads.append(grad)
    return grads


@EX.check(points=3, prop="dq, dk, dv match torch autograd through scaled_dot_product_attention "
       "(float64, with and without a mask).")
@given(case=attention_grad_case())
def test_matches_torch_autograd(ctx, case):
    expected = attention_grads(*case)
    for name, got, want in zip(NAMES, student_grads(ctx, case), expected):
        assert_close(got, want, what=name)


@EX.check(points=2, prop="dq, dk, dv match central finite differences of "
       "sum(grad_output * output) (float64, step 1e-6).", examples=10)
@given(case=attention_grad_case(max_t=3))
def test_matches_finite_differences(ctx, case):
    got = student_grads(ctx, case)
    for name, grad, numeric in zip(NAMES, got, numerical_grads(case)):
        bad = ~np.isclose(grad, numeric, rtol=FD_RTOL, atol=FD_ATOL)
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            raise CheckFailed(f"{name}{list(index)} is {grad[index]:.6g}, finite differences give "
                              f"{numeric[index]:.6g}", expected=numeric, got=grad, off=bad)


@EX.check(points=2, prop="Blocked pairs pass no gradient: a key blocked for every query gets "
       "dk = dv = 0, and the rest match autograd.")
@given(case=attention_grad_case(blocked_key=True))
def test_masked_positions_get_zero_gradient(ctx, case):
    _, dk, dv = student_grads(ctx, case)
    for name, grad in (("dk", dk), ("dv", dv)):
        if (grad[..., -1, :] != 0).any():
            raise CheckFailed(f"the last key is blocked for every query, yet its {name} is "
                              "not zero: did the backward pass forget the mask?",
                              got=grad[..., -1, :])
    expected = attention_grads(*case)
    assert_close(dk, expected[1], what="dk")


@EX.check(points=1, prop="dk sums to zero over the key axis (each softmax-backward row sums to "
       "zero).")
@given(case=attention_grad_case())
def test_dk_sums_to_zero_over_keys(ctx, case):
    _, dk, _ = student_grads(ctx, case)
    total = dk.sum(axis=-2)
    scale = 1.0 + np.abs(dk).sum()
    if (np.abs(total) > 1e-9 * scale).any():
        raise CheckFailed("dk summed over the keys is not zero", expected=np.zeros_like(total),
                          got=total)


@EX.check(points=1, prop="A wrongly shaped grad_output or a query with no allowed key raise "
       "ValueError.")
def test_rejects_bad_inputs(ctx):
    # (1, 2, 2) broadcasts in every matmul: only an explicit shape check catches it.
    q = k = v = np.ones((2, 2, 2))
    grad_output = np.ones((1, 2, 2))
    ctx.show(q=q, k=k, v=v, grad_output=grad_output)
    expect_value_error(lambda: ctx.student.attention_backward(q, k, v, grad_output),
                       "grad_output of shape (1, 2, 2) for an output of shape (2, 2, 2)")
    q = k = v = grad_output = np.ones((2, 2))
    mask = np.array([[False, True], [True, True]])
    ctx.show(q=q, k=k, v=v, grad_output=grad_output, mask=mask)
    expect_value_error(lambda: ctx.student.attention_backward(q, k, v, grad_output, mask),
                       "mask [[False, True], [True, True]] (query 1 sees nothing)")


EX.judge_input("attention_backward", reference=attention_grads)


### BEGIN HIDDEN CHECKS
def attention_grad_structures(rng):
    """The inputs the visible checks are built on, whatever the course secret, with values
    from ``rng``: no mask, the causal mask, one (Tq, Tk) mask for a batch and a mask per batch
    entry; d_v != d_k."""
    cases = []
    for batch, (tq, tk, dk, dv), mask_kind in (
        ((), (2, 3, 1, 2), None),
        ((1,), (3, 3, 2, 2), "causal"),
        ((2,), (4, 3, 3, 1), "broadcast"),
        ((2,), (3, 4, 2, 3), "per batch entry"),
    ):
        q, k, v, g = (grid_array(rng, np.float64, (*batch, t, d))
                      for t, d in ((tq, dk), (tk, dk), (tk, dv), (tq, dv)))
        mask = None
        if mask_kind == "causal":
            mask = causal(tq)
        elif mask_kind is not None:
            mask = telling_mask(rng, (tq, tk) if mask_kind == "broadcast" else (*batch, tq, tk))
        cases.append({"case": AttentionGrad(q, k, v, g, mask)})
    return cases


@EX.check(points=1, hidden=True, cases=attention_grad_structures,
          prop="attention_backward agrees with the answer key.")
@given(case=attention_grad_case())
def test_attention_backward_matches_answer_key(ctx, case):
    assert_matches_key(ctx.student.attention_backward(*case), ctx.key.attention_backward(*case),
                       what="(dq, dk, dv)", parts=("dq", "dk", "dv"))
### END HIDDEN CHECKS


# -- misconceptions -----------------------------------------------------------------------------
EX.misconception(
    "backward-missing-mask",
    mistake="recomputes the weights without the mask in the backward pass",
    hint="the backward pass needs the forward's masked weights: fill blocked scores with -inf "
         "before the softmax there too, so a blocked pair passes no gradient.",
)


def unmasked_grads(q, k, v, grad_output, mask=None):
    """(dq, dk, dv) with one or more of them computed as if there were no mask; where the
    reference refuses the arguments, it does too (nothing to show without a mask)."""
    masked = attention_grads(q, k, v, grad_output, mask)
    if mask is None:
        return []
    unmasked = attention_grads(q, k, v, grad_output)
    return [tuple(u if forgets else m for m, u, forgets in zip(masked, unmasked, which))
            for which in itertools.product((False, True), repeat=3) if any(which)]


@EX.probe("backward-missing-mask",
          explains=("test_matches_torch_autograd", "test_matches_finite_differences",
                    "test_masked_positions_get_zero_gradient"),
          mistaken={"attention_backward": unmasked_grads})
def probe_missing_mask(student) -> bool:
    rng = np.random.default_rng(6)
    q, k, v, g = (rng.normal(size=(3, 2)) for _ in range(4))
    mask = causal_mask(3)
    got = student.attention_backward(q, k, v, g, mask)
    correct = attention_grads(q, k, v, g, mask)
    unmasked = attention_grads(q, k, v, g)
    # The mistake may hide in any of the three gradients (dv, dq, dk all use the weights).
    wrong = [not matches(a, b) for a, b in zip(got, correct)]
    return any(wrong) and all(matches(a, b) for a, b, w in zip(got, unmasked, wrong) if w)
