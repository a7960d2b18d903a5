"""Checks for the bonus exercise `attention_backward`, against torch autograd and finite
differences. All in float64, at float64 tolerance (rtol 1e-7, atol 1e-9) against autograd;
finite differences (central, step 1e-6) are compared at rtol 1e-5, atol 1e-6."""

import numpy as np
from hypothesis import given

from .. import reference, reference_bonus
from ..assertions import CheckFailed, assert_close, assert_shape, expect_value_error
from ..registry import check
from ..strategies_bonus import AttentionGrad, attention_grad_case

EX = "attention_backward"
NAMES = ("dq", "dk", "dv")
STEP, FD_RTOL, FD_ATOL = 1e-6, 1e-5, 1e-6


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
        out, _ = reference.scaled_dot_product_attention(q, k, v, case.mask)
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


@check(EX, points=3, prop="dq, dk, dv match torch autograd through scaled_dot_product_attention "
       "(float64, with and without a mask).")
@given(case=attention_grad_case())
def test_matches_torch_autograd(ctx, case):
    expected = reference_bonus.attention_grads(*case)
    for name, got, want in zip(NAMES, student_grads(ctx, case), expected):
        assert_close(got, want, what=name)


@check(EX, points=2, prop="dq, dk, dv match central finite differences of "
       "sum(grad_output * output) (float64, step 1e-6).", examples=10)
@given(case=attention_grad_case(max_t=3))
def test_matches_finite_differences(ctx, case):
    got = student_grads(ctx, case)
    for name, grad, numeric in zip(NAMES, got, numerical_grads(case)):
        bad = ~np.isclose(grad, numeric, rtol=FD_RTOL, atol=FD_ATOL)
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            raise CheckFailed(f"{name}{list(index)} is {grad[index]:.6g}, finite differences give "
                              f"{numeric[index]:.6g}", expected=numeric, got=grad)


@check(EX, points=2, prop="Blocked pairs pass no gradient: a key blocked for every query gets "
       "dk = dv = 0, and the rest match autograd.")
@given(case=attention_grad_case(blocked_key=True))
def test_masked_positions_get_zero_gradient(ctx, case):
    _, dk, dv = student_grads(ctx, case)
    for name, grad in (("dk", dk), ("dv", dv)):
        if (grad[..., -1, :] != 0).any():
            raise CheckFailed(f"the last key is blocked for every query, yet its {name} is "
                              "not zero: did the backward pass forget the mask?",
                              got=grad[..., -1, :])
    expected = reference_bonus.attention_grads(*case)
    assert_close(dk, expected[1], what="dk")


@check(EX, points=1, prop="dk sums to zero over the key axis (each softmax-backward row sums to "
       "zero).")
@given(case=attention_grad_case())
def test_dk_sums_to_zero_over_keys(ctx, case):
    _, dk, _ = student_grads(ctx, case)
    total = dk.sum(axis=-2)
    scale = 1.0 + np.abs(dk).sum()
    if (np.abs(total) > 1e-9 * scale).any():
        raise CheckFailed("dk summed over the keys is not zero", expected=np.zeros_like(total),
                          got=total)


@check(EX, points=1, prop="A wrongly shaped grad_output or a query with no allowed key raise "
       "ValueError.")
def test_rejects_bad_inputs(ctx):
    # (1, 2, 2) broadcasts in every matmul: only an explicit shape check catches it.
    q = k = v = np.ones((2, 2, 2))
    ctx.show(q=q, grad_output=np.ones((1, 2, 2)))
    expect_value_error(lambda: ctx.student.attention_backward(q, k, v, np.ones((1, 2, 2))),
                       "grad_output of shape (1, 2, 2) for an output of shape (2, 2, 2)")
    q = k = v = np.ones((2, 2))
    mask = np.array([[False, True], [True, True]])
    ctx.show(q=q, mask=mask)
    expect_value_error(lambda: ctx.student.attention_backward(q, k, v, np.ones((2, 2)), mask),
                       "mask [[False, True], [True, True]] (query 1 sees nothing)")
