"""Checks for the `softmax_backward` exercise."""

import numpy as np
import torch
from hypothesis import given

from .. import reference
from ..assertions import CheckFailed, assert_close, assert_shape, expect_value_error
from ..registry import check
from ..strategies import backward_case, logits_and_axis

EX = "softmax_backward"


def autograd_reference(logits, upstream, axis):
    """dL/dlogits by torch autograd, in float64."""
    x = torch.from_numpy(logits.astype(np.float64)).requires_grad_(True)
    torch.softmax(x, dim=axis).backward(torch.from_numpy(upstream.astype(np.float64)))
    return x.grad.numpy()


@check(EX, points=4, prop="The gradient matches torch autograd through torch.softmax (float64).")
@given(case=logits_and_axis(dtypes=(np.float64,), low=-4, high=4))
def test_matches_torch_autograd(ctx, case):
    logits, axis = case
    upstream = np.cos(np.arange(logits.size, dtype=np.float64)).reshape(logits.shape)
    p = reference.softmax(logits, axis)
    ctx.show(probabilities=p, upstream=upstream, axis=axis)
    got = ctx.student.softmax_backward(p, upstream, axis=axis)
    assert_close(got, autograd_reference(logits, upstream, axis), what="dL/dlogits")


@check(EX, points=2, prop="The gradient matches central finite differences of the loss.")
@given(case=logits_and_axis(dtypes=(np.float64,), low=-3, high=3, max_dims=2))
def test_matches_finite_differences(ctx, case):
    logits, axis = case
    upstream = np.sin(1.0 + np.arange(logits.size, dtype=np.float64)).reshape(logits.shape)
    eps = 1e-6
    numeric = np.zeros_like(logits)
    for index in np.ndindex(logits.shape):
        step = np.zeros_like(logits)
        step[index] = eps
        up = np.sum(reference.softmax(logits + step, axis) * upstream)
        down = np.sum(reference.softmax(logits - step, axis) * upstream)
        numeric[index] = (up - down) / (2 * eps)
    p = reference.softmax(logits, axis)
    ctx.show(probabilities=p, upstream=upstream, axis=axis)
    got = assert_shape(ctx.student.softmax_backward(p, upstream, axis=axis), p.shape)
    bad = np.abs(got - numeric) > 1e-6 + 1e-5 * np.abs(numeric)
    if bad.any():
        raise CheckFailed("the gradient disagrees with finite differences", expected=numeric,
                          got=got)


@check(EX, points=2, prop="The gradient sums to zero along `axis` (the softmax ignores shifts).")
@given(case=backward_case())
def test_sums_to_zero_along_axis(ctx, case):
    got = assert_shape(
        ctx.student.softmax_backward(case.probabilities, case.upstream, axis=case.axis),
        case.probabilities.shape,
    )
    sums = got.sum(axis=case.axis)
    assert_close(sums, np.zeros_like(sums), what="the sums along axis")


@check(EX, points=2, prop="p = [0.5, 0.5] with upstream [1, 0] gives [0.25, -0.25].")
def test_two_position_example(ctx):
    p = np.array([0.5, 0.5])
    for upstream, expected in (([1.0, 0.0], [0.25, -0.25]), ([1.0, 1.0], [0.0, 0.0])):
        ctx.show(probabilities=p, upstream=np.array(upstream))
        got = ctx.student.softmax_backward(p, np.array(upstream))
        assert_close(got, expected, what="dL/dlogits")


@check(EX, points=2, prop="The gradient is taken along the given `axis`, for every axis.")
@given(case=backward_case())
def test_uses_the_given_axis(ctx, case):
    if case.probabilities.ndim < 2:
        case = case._replace(
            probabilities=np.stack([case.probabilities, case.probabilities[::-1]]),
            upstream=np.stack([case.upstream, -case.upstream]),
        )
        case = case._replace(axis=1)
    expected = reference.softmax_backward(case.probabilities, case.upstream, case.axis)
    ctx.show(**case._asdict())
    got = ctx.student.softmax_backward(case.probabilities, case.upstream, axis=case.axis)
    assert_close(got, expected, what="dL/dlogits")


@check(EX, points=1, prop="float32 inputs give the float32-accurate gradient, as float32.")
@given(case=backward_case(dtypes=(np.float32,)))
def test_float32_inputs(ctx, case):
    p = case.probabilities.astype(np.float32)
    g = case.upstream.astype(np.float32)
    got = ctx.student.softmax_backward(p, g, axis=case.axis)
    expected = reference.softmax_backward(p.astype(np.float64), g.astype(np.float64), case.axis)
    assert_close(got, expected, dtype=np.float32, what="dL/dlogits")
    if got.dtype != np.float32:
        raise CheckFailed(f"float32 inputs gave dtype {got.dtype}, expected float32")


@check(EX, points=1, prop="Probabilities and upstream of different shapes raise ValueError.")
def test_rejects_mismatched_shapes(ctx):
    p = np.full((2, 3), 1 / 3)
    for upstream in (np.ones((3, 2)), np.ones(3), np.ones((2, 3, 1))):
        ctx.show(probabilities=p, upstream=upstream)
        expect_value_error(
            lambda u=upstream: ctx.student.softmax_backward(p, u),
            f"probabilities of shape {p.shape} and upstream of shape {upstream.shape}",
        )
