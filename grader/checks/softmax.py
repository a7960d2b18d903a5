"""Checks for the `softmax` exercise."""

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from .. import reference
from ..assertions import CheckFailed, assert_close, assert_shape, expect_value_error
from ..registry import check
from ..strategies import Logits, logits_and_axis, masked_logits

EX = "softmax"


@check(EX, points=2, prop="Every slice along `axis` sums to 1.")
@given(case=logits_and_axis())
def test_slices_sum_to_one(ctx, case):
    p = assert_shape(ctx.student.softmax(case.logits, axis=case.axis), case.logits.shape)
    sums = p.astype(np.float64).sum(axis=case.axis)
    assert_close(sums, np.ones_like(sums), dtype=case.logits.dtype, what="the slice sums")


@check(EX, points=1, prop="Every probability is non-negative and at most 1.")
@given(case=logits_and_axis())
def test_weights_in_unit_interval(ctx, case):
    p = assert_shape(ctx.student.softmax(case.logits, axis=case.axis), case.logits.shape)
    if not ((p >= 0) & (p <= 1)).all():
        raise CheckFailed("some probabilities are negative or above 1", got=p)


@check(EX, points=3, prop="The result matches torch.softmax along `axis` (float32 and float64).")
@given(case=logits_and_axis())
def test_matches_torch_softmax(ctx, case):
    expected = torch.softmax(torch.from_numpy(case.logits), dim=case.axis).numpy()
    got = ctx.student.softmax(case.logits, axis=case.axis)
    assert_close(got, expected, dtype=case.logits.dtype)


@check(EX, points=1, prop="Adding the same constant to a whole slice leaves the result unchanged.")
@given(case=logits_and_axis(dtypes=(np.float64,)), shift=st.floats(-50, 50))
def test_invariant_to_adding_a_constant(ctx, case, shift):
    base = ctx.student.softmax(case.logits, axis=case.axis)
    moved = ctx.student.softmax(case.logits + shift, axis=case.axis)
    assert_close(moved, base, what="softmax(logits + c)")


@check(EX, points=1, prop="Entries that are -inf get exactly zero probability.")
@given(case=masked_logits())
def test_exact_zeros_at_neg_inf(ctx, case):
    p = assert_shape(ctx.student.softmax(case.logits, axis=case.axis), case.logits.shape)
    blocked = np.isneginf(case.logits)
    if (p[blocked] != 0).any():
        raise CheckFailed("a -inf entry got a non-zero probability", got=p)
    assert_close(p, reference.softmax(case.logits, case.axis))


@check(EX, points=2, prop="Huge logits do not overflow: [1000, 1000] gives [0.5, 0.5].")
@given(case=logits_and_axis(dtypes=(np.float64,)), offset=st.sampled_from([1e3, -1e3, 1e4]))
def test_stable_for_huge_logits(ctx, case, offset):
    ctx.show(logits=np.array([1000.0, 1000.0]), axis=-1)
    assert_close(ctx.student.softmax(np.array([1000.0, 1000.0])), [0.5, 0.5])
    ctx.show(logits=case.logits + offset, axis=case.axis)
    got = ctx.student.softmax(case.logits + offset, axis=case.axis)
    assert_close(got, reference.softmax(case.logits, case.axis))


@check(EX, points=1, prop="float32 stays float32, float64 stays float64, integers give float64.")
def test_result_dtype(ctx):
    for logits in (np.array([1.0, 2.0], np.float32), np.array([1.0, 2.0]), np.array([1, 2])):
        ctx.show(logits=logits)
        got = ctx.student.softmax(logits)
        expected = np.result_type(logits.dtype, np.float32)
        if got.dtype != expected:
            raise CheckFailed(f"the result has dtype {got.dtype}, expected {expected}")
    ctx.show(logits=[1, 2, 3])
    assert_close(ctx.student.softmax([1, 2, 3]), reference.softmax(np.array([1, 2, 3])))


@check(EX, points=1, prop="NaN or +inf logits raise ValueError.")
def test_rejects_nan_and_posinf(ctx):
    for logits in (np.array([0.0, np.nan]), np.array([[1.0, np.inf], [0.0, 0.0]])):
        ctx.show(logits=logits)
        expect_value_error(lambda x=logits: ctx.student.softmax(x), f"logits {logits.tolist()}")


@check(EX, points=1, prop="A slice with no entry above -inf (or none at all) raises ValueError.")
def test_rejects_fully_masked_slice(ctx):
    cases = [
        Logits(np.array([-np.inf, -np.inf]), -1),
        Logits(np.array([[0.0, -np.inf], [0.0, -np.inf]]), 0),
        Logits(np.zeros((2, 0)), -1),
    ]
    for case in cases:
        ctx.show(logits=case.logits, axis=case.axis)
        expect_value_error(
            lambda c=case: ctx.student.softmax(c.logits, axis=c.axis),
            f"logits {case.logits.tolist()} along axis {case.axis}",
        )


@check(EX, points=1, prop="Non-real dtypes and inexact integers raise ValueError.")
def test_rejects_non_real_and_inexact_integers(ctx):
    cases = {
        "complex logits": np.array([1 + 1j, 0j]),
        "string logits": np.array(["a", "b"]),
        "int64 logits beyond 2**53": np.array([2**53 + 1, 0], dtype=np.int64),
    }
    for what, logits in cases.items():
        ctx.show(logits=logits if logits.dtype.kind != "U" else logits.tolist())
        value = logits if logits.dtype.kind != "U" else logits.tolist()
        expect_value_error(lambda v=value: ctx.student.softmax(v), what)
