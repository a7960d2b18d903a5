"""Checks for the `heads` exercise: `split_heads` and `merge_heads`."""

import numpy as np
from hypothesis import given

from ..assertions import assert_equal, assert_shape, expect_value_error
from ..registry import check
from ..strategies import heads_case

EX = "heads"


@check(EX, points=3, prop="split_heads(x, H)[:, h] is x[:, :, h*D:(h+1)*D] for every head h.")
@given(case=heads_case())
def test_head_h_is_columns_h(ctx, case):
    x, n_head = case
    b, t, c = x.shape
    d = c // n_head
    got = assert_shape(ctx.student.split_heads(x, n_head), (b, n_head, t, d), "split_heads(x)")
    expected = np.stack([x[:, :, h * d:(h + 1) * d] for h in range(n_head)], axis=1)
    assert_equal(got, expected, "split_heads(x)")


@check(EX, points=2, prop="merge_heads(y)[:, :, h*D:(h+1)*D] is head h of y, for (B, H, T, D) y.")
@given(case=heads_case())
def test_merge_concatenates_heads(ctx, case):
    x, n_head = case
    b, t, c = x.shape
    y = x.reshape(b, n_head, t, c // n_head)  # any (B, H, T, D) array with distinct entries
    ctx.show(y=y)
    got = assert_shape(ctx.student.merge_heads(y), (b, t, c), "merge_heads(y)")
    assert_equal(got, np.concatenate(list(np.moveaxis(y, 1, 0)), axis=-1), "merge_heads(y)")


@check(EX, points=2, prop="merge_heads undoes split_heads: merge_heads(split_heads(x, H)) == x.")
@given(case=heads_case())
def test_merge_inverts_split(ctx, case):
    x, n_head = case
    parts = ctx.student.split_heads(x, n_head)
    assert_equal(ctx.student.merge_heads(parts), x, "merge_heads(split_heads(x, H))")


@check(EX, points=1, prop="split_heads raises ValueError when C % H != 0 or x is not 3-D.")
def test_split_rejects_bad_input(ctx):
    for x, n_head, what in (
        (np.zeros((1, 2, 6)), 4, "C = 6 with n_head = 4"),
        (np.zeros((2, 6)), 2, "a 2-D x"),
        (np.zeros((1, 1, 2, 6)), 2, "a 4-D x"),
    ):
        ctx.show(x=x, n_head=n_head)
        expect_value_error(lambda x=x, h=n_head: ctx.student.split_heads(x, h), what)


@check(EX, points=1, prop="merge_heads raises ValueError when x is not 4-D.")
def test_merge_rejects_non_4d(ctx):
    for x in (np.zeros((2, 3, 4)), np.zeros((1, 2, 3, 4, 5))):
        ctx.show(x=x)
        expect_value_error(lambda x=x: ctx.student.merge_heads(x), f"x of shape {x.shape}")
