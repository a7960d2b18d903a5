"""Exercise `softmax_backward`: the gradient of a loss through the softmax, in NumPy."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from ..core.assertions import CheckFailed, assert_close, assert_shape, expect_value_error
from ..core.diagnose import matches, softmax_unchecked
from ..core.exercise import Exercise
from ..core.strategies import floats_array, grid_array, logits_and_axis
from .softmax import softmax as reference_softmax

EX = Exercise("softmax_backward", functions=("softmax_backward",), framework="numpy",
              track="core", points=15, order=2,
              title="`softmax_backward(probabilities, upstream, axis=-1)`: dL/dlogits")


# -- reference ----------------------------------------------------------------------------------
@EX.reference
def softmax_backward(probabilities, upstream, axis=-1):
    """torch's own softmax backward; NumPy in, NumPy out (or torch)."""
    if isinstance(probabilities, torch.Tensor):
        p, g = probabilities, torch.as_tensor(upstream, device=probabilities.device)
    else:
        p, g = np.asarray(probabilities), np.asarray(upstream)
    if tuple(p.shape) != tuple(g.shape):
        raise ValueError(f"probabilities {tuple(p.shape)} and upstream {tuple(g.shape)} differ")
    if isinstance(p, torch.Tensor):
        return torch._softmax_backward_data(g, p, axis % p.ndim, p.dtype)
    common = np.result_type(p.dtype, g.dtype, np.float32)
    tp, tg = torch.from_numpy(p.astype(common)), torch.from_numpy(g.astype(common))
    if tp.numel() == 0:
        return tp.numpy()
    return torch._softmax_backward_data(tg, tp, axis % tp.ndim, tp.dtype).numpy()


def autograd_reference(logits, upstream, axis):
    """dL/dlogits by torch autograd, in float64."""
    x = torch.from_numpy(logits.astype(np.float64)).requires_grad_(True)
    # sum(y * g).backward(), not y.backward(g): the same gradient, bit for bit, without the
    # import (SymPy, half a second) that a gradient argument costs the grading process
    (torch.softmax(x, dim=axis) * torch.from_numpy(upstream.astype(np.float64))).sum().backward()
    return x.grad.numpy()


# -- strategies ---------------------------------------------------------------------------------
class Backward(NamedTuple):
    probabilities: np.ndarray
    upstream: np.ndarray
    axis: int


@st.composite
def backward_case(draw, dtypes=(np.float64,)) -> Backward:
    logits, axis = draw(logits_and_axis(dtypes=dtypes, low=-4, high=4))
    upstream = draw(floats_array(logits.dtype, logits.shape, -3, 3))
    return Backward(reference_softmax(logits, axis), upstream, axis)


# -- checks -------------------------------------------------------------------------------------
@EX.check(points=4, prop="The gradient matches torch autograd through torch.softmax (float64).")
@given(case=logits_and_axis(dtypes=(np.float64,), low=-4, high=4))
def test_matches_torch_autograd(ctx, case):
    logits, axis = case
    upstream = np.cos(np.arange(logits.size, dtype=np.float64)).reshape(logits.shape)
    p = reference_softmax(logits, axis)
    ctx.show(probabilities=p, upstream=upstream, axis=axis, drawn=True)
    got = ctx.student.softmax_backward(p, upstream, axis=axis)
    assert_close(got, autograd_reference(logits, upstream, axis), what="dL/dlogits")


@EX.check(points=2, prop="The gradient matches central finite differences of the loss.")
@given(case=logits_and_axis(dtypes=(np.float64,), low=-3, high=3, max_dims=2))
def test_matches_finite_differences(ctx, case):
    logits, axis = case
    upstream = np.sin(1.0 + np.arange(logits.size, dtype=np.float64)).reshape(logits.shape)
    eps = 1e-6
    numeric = np.zeros_like(logits)
    for index in np.ndindex(logits.shape):
        step = np.zeros_like(logits)
        step[index] = eps
        up = np.sum(reference_softmax(logits + step, axis) * upstream)
        down = np.sum(reference_softmax(logits - step, axis) * upstream)
        numeric[index] = (up - down) / (2 * eps)
    p = reference_softmax(logits, axis)
    ctx.show(probabilities=p, upstream=upstream, axis=axis, drawn=True)
    got = assert_shape(ctx.student.softmax_backward(p, upstream, axis=axis), p.shape)
    bad = np.abs(got - numeric) > 1e-6 + 1e-5 * np.abs(numeric)
    if bad.any():
        raise CheckFailed("the gradient disagrees with finite differences", expected=numeric,
                          got=got, off=bad)


@EX.check(points=2, prop="The gradient sums to zero along `axis` (the softmax ignores shifts).")
@given(case=backward_case())
def test_sums_to_zero_along_axis(ctx, case):
    got = assert_shape(
        ctx.student.softmax_backward(case.probabilities, case.upstream, axis=case.axis),
        case.probabilities.shape,
    )
    sums = got.sum(axis=case.axis)
    assert_close(sums, np.zeros_like(sums), what="the sums along axis")


@EX.check(points=2, prop="p = [0.5, 0.5] with upstream [1, 0] gives [0.25, -0.25], and with "
       "upstream [1, 1] gives [0, 0].")
def test_two_position_example(ctx):
    p = np.array([0.5, 0.5])
    for upstream, expected in (([1.0, 0.0], [0.25, -0.25]), ([1.0, 1.0], [0.0, 0.0])):
        ctx.show(probabilities=p, upstream=np.array(upstream))
        got = ctx.student.softmax_backward(p, np.array(upstream))
        assert_close(got, expected, what="dL/dlogits")


@EX.check(points=2, prop="The gradient is taken along the given `axis`, for every axis.")
@given(case=backward_case())
def test_uses_the_given_axis(ctx, case):
    if case.probabilities.ndim < 2:
        case = case._replace(
            probabilities=np.stack([case.probabilities, case.probabilities[::-1]]),
            upstream=np.stack([case.upstream, -case.upstream]),
        )
        case = case._replace(axis=1)
    expected = softmax_backward(case.probabilities, case.upstream, case.axis)
    ctx.show(**case._asdict(), drawn=True)
    got = ctx.student.softmax_backward(case.probabilities, case.upstream, axis=case.axis)
    assert_close(got, expected, what="dL/dlogits")


@EX.check(points=1, prop="float32 inputs give the float32-accurate gradient, as float32.")
@given(case=backward_case(dtypes=(np.float32,)))
def test_float32_inputs(ctx, case):
    p = case.probabilities.astype(np.float32)
    g = case.upstream.astype(np.float32)
    got = ctx.student.softmax_backward(p, g, axis=case.axis)
    expected = softmax_backward(p.astype(np.float64), g.astype(np.float64), case.axis)
    assert_close(got, expected, dtype=np.float32, what="dL/dlogits")
    if got.dtype != np.float32:
        raise CheckFailed(f"float32 inputs gave dtype {got.dtype}, expected float32")


@EX.check(points=1, prop="Probabilities and upstream of different shapes raise ValueError.")
def test_rejects_mismatched_shapes(ctx):
    p = np.full((2, 3), 1 / 3)
    for upstream in (np.ones((3, 2)), np.ones(3), np.ones((2, 3, 1))):
        ctx.show(probabilities=p, upstream=upstream)
        expect_value_error(
            lambda u=upstream: ctx.student.softmax_backward(p, u),
            f"probabilities of shape {p.shape} and upstream of shape {upstream.shape}",
        )


EX.judge_input("softmax_backward")


### BEGIN HIDDEN CHECKS
def backward_structures(rng):
    """The shapes and axes the visible checks are built on, whatever the course secret, with
    logits and upstream gradients from ``rng``: one to three axes, the first, a middle and the
    last one (counted from either end)."""
    cases = []
    for shape, axis in (((4,), -1), ((3, 4), 0), ((2, 3, 4), -2), ((3, 2, 4), 2)):
        logits = grid_array(rng, np.float64, shape, -4, 4)
        upstream = grid_array(rng, np.float64, shape, -3, 3)
        cases.append({"case": Backward(reference_softmax(logits, axis), upstream, axis)})
    return cases


@EX.check(points=1, hidden=True, cases=backward_structures,
          prop="softmax_backward agrees with the answer key.")
@given(case=backward_case())
def test_softmax_backward_matches_answer_key(ctx, case):
    assert_close(ctx.student.softmax_backward(*case), ctx.key.softmax_backward(*case))
### END HIDDEN CHECKS


# -- misconceptions -----------------------------------------------------------------------------
EX.misconception(
    "softmax-backward-diagonal",
    mistake="uses only the diagonal of the Jacobian, p * (1 - p) * g",
    hint="raising one logit lowers every other probability in its slice, so the Jacobian is "
         "diag(p) - p p^T: the gradient is p * (g - sum(p * g)) along the axis.",
)


def diagonal_only(probabilities, upstream, axis=-1):
    """p * (1 - p) * g, the Jacobian's diagonal alone, by torch; where the reference refuses
    the arguments, it does too."""
    softmax_backward(probabilities, upstream, axis)
    p, g = (torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (probabilities, upstream))
    return [(p * (1 - p) * g).numpy()]


@EX.probe("softmax-backward-diagonal",
          explains=("test_matches_torch_autograd", "test_matches_finite_differences",
                    "test_sums_to_zero_along_axis", "test_two_position_example",
                    "test_uses_the_given_axis", "test_float32_inputs"),
          mistaken={"softmax_backward": diagonal_only})
def probe_diagonal(student) -> bool:
    p = softmax_unchecked(np.array([0.1, 0.5, -0.3, 1.0]))
    g = np.array([1.0, -2.0, 0.5, 0.25])
    return matches(student.softmax_backward(p, g, axis=-1), diagonal_only(p, g)[0])
