"""Exercise `heads`: splitting the width into heads and merging them back, in NumPy."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from ..core.assertions import assert_equal, assert_shape, expect_value_error
from ..core.diagnose import matches
from ..core.exercise import Exercise, positive_int

EX = Exercise("heads", functions=("split_heads", "merge_heads"), framework="numpy",
              track="core", points=10, order=4, title="`split_heads(x, n_head)`, `merge_heads(x)`")


# -- reference ----------------------------------------------------------------------------------
@EX.reference
def split_heads(x, n_head):
    """(B, T, C) -> (B, H, T, C // H) by torch's view and transpose; NumPy in, NumPy out."""
    as_numpy = not isinstance(x, torch.Tensor)
    arr = torch.as_tensor(np.asarray(x)) if as_numpy else x
    if arr.ndim != 3:
        raise ValueError(f"split_heads expects (B, T, C), got shape {tuple(arr.shape)}")
    batch, length, width = arr.shape
    n_head = positive_int(n_head, "n_head", 1)
    if width % n_head != 0:
        raise ValueError(f"n_head={n_head} heads do not split the width {width}")
    parts = arr.reshape(batch, length, n_head, width // n_head).transpose(1, 2)
    return parts.numpy() if as_numpy else parts


@EX.reference
def merge_heads(x):
    """(B, H, T, D) -> (B, T, H * D) by torch's transpose and reshape; NumPy in, NumPy out."""
    as_numpy = not isinstance(x, torch.Tensor)
    arr = torch.as_tensor(np.asarray(x)) if as_numpy else x
    if arr.ndim != 4:
        raise ValueError(f"merge_heads expects (B, H, T, D), got shape {tuple(arr.shape)}")
    b, h, t, d = arr.shape
    merged = arr.transpose(1, 2).reshape(b, t, h * d)
    return merged.numpy() if as_numpy else merged


# -- strategies ---------------------------------------------------------------------------------
class Heads(NamedTuple):
    x: np.ndarray
    n_head: int


@st.composite
def heads_case(draw) -> Heads:
    b, t = draw(st.integers(1, 2)), draw(st.integers(1, 4))
    n_head, d_head = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    # Distinct entries, so any misplaced element shows.
    x = np.arange(b * t * n_head * d_head, dtype=np.float64).reshape(b, t, n_head * d_head)
    return Heads(x, n_head)


# -- checks -------------------------------------------------------------------------------------
@EX.check(points=3, prop="split_heads(x, H)[:, h] is x[:, :, h*D:(h+1)*D] for every head h.")
@given(case=heads_case())
def test_head_h_is_columns_h(ctx, case):
    x, n_head = case
    batch, length, width = x.shape
    d = width // n_head
    got = assert_shape(ctx.student.split_heads(x, n_head), (batch, n_head, length, d),
                       "split_heads(x)")
    columns = torch.from_numpy(x).split(d, dim=-1)  # head h: columns h*D .. (h+1)*D - 1
    assert_equal(got, torch.stack(columns, dim=1).numpy(), "split_heads(x)")


@EX.check(points=2, prop="merge_heads(x)[:, :, h*D:(h+1)*D] is head h of x, for (B, H, T, D) x.")
@given(case=heads_case())
def test_merge_concatenates_heads(ctx, case):
    x, n_head = case
    batch, length, width = x.shape
    # any (B, H, T, D), distinct entries; named x, as merge_heads names its argument
    heads = x.reshape(batch, n_head, length, width // n_head)
    ctx.show(x=heads, drawn=True)
    got = assert_shape(ctx.student.merge_heads(heads), (batch, length, width), "merge_heads(x)")
    assert_equal(got, torch.cat(torch.from_numpy(heads).unbind(1), dim=-1).numpy(),
                 "merge_heads(x)")


@EX.check(points=2, prop="merge_heads undoes split_heads: merge_heads(split_heads(x, H)) == x.")
@given(case=heads_case())
def test_merge_inverts_split(ctx, case):
    x, n_head = case
    parts = ctx.student.split_heads(x, n_head)
    assert_equal(ctx.student.merge_heads(parts), x, "merge_heads(split_heads(x, H))")


@EX.check(points=1, prop="split_heads raises ValueError when C % H != 0 or x is not 3-D.")
def test_split_rejects_bad_input(ctx):
    for x, n_head, what in (
        (np.zeros((1, 2, 6)), 4, "C = 6 with n_head = 4"),
        (np.zeros((2, 6)), 2, "a 2-D x"),
        (np.zeros((1, 1, 2, 6)), 2, "a 4-D x"),
    ):
        ctx.show(x=x, n_head=n_head)
        expect_value_error(lambda x=x, h=n_head: ctx.student.split_heads(x, h), what)


@EX.check(points=1, prop="merge_heads raises ValueError when x is not 4-D.")
def test_merge_rejects_non_4d(ctx):
    for x in (np.zeros((2, 3, 4)), np.zeros((1, 2, 3, 4, 5))):
        ctx.show(x=x)
        expect_value_error(lambda x=x: ctx.student.merge_heads(x), f"x of shape {x.shape}")


EX.judge_input("split_heads")
EX.judge_input("merge_heads")


### BEGIN HIDDEN CHECKS
def heads_structures(rng):
    """The shapes the visible checks are built on, whatever the course secret, with distinct
    entries in an order from ``rng``: one head and several, heads one column wide and wider,
    one position, a batch of one and of two."""
    cases = []
    for b, t, n_head, d_head in ((2, 1, 3, 2), (1, 4, 4, 1), (2, 2, 1, 3), (2, 3, 2, 3)):
        x = rng.permutation(b * t * n_head * d_head).astype(np.float64)
        cases.append({"case": Heads(x.reshape(b, t, n_head * d_head), n_head)})
    return cases


@EX.check(points=1, hidden=True, cases=heads_structures,
          prop="split_heads and merge_heads agree with the answer key.")
@given(case=heads_case())
def test_heads_match_answer_key(ctx, case):
    assert_equal(ctx.student.split_heads(*case), ctx.key.split_heads(*case), "split_heads")
    y = ctx.key.split_heads(*case)
    assert_equal(ctx.student.merge_heads(y), ctx.key.merge_heads(y), "merge_heads")
### END HIDDEN CHECKS


# -- misconceptions -----------------------------------------------------------------------------
EX.misconception(
    "head-split-scrambled",
    mistake="reshapes straight to (B, H, T, D), mixing positions across heads",
    hint="split the width first, reshape (B, T, C) -> (B, T, H, D), then swap the T and H axes; "
         "a direct reshape to (B, H, T, D) mixes tokens into each head.",
)


def scrambled_split(x, n_head):
    """The straight view of (B, T, C) as (B, H, T, D), by torch; where the reference refuses
    the input, it does too."""
    heads = split_heads(x, n_head)
    return [torch.from_numpy(np.ascontiguousarray(x)).reshape(heads.shape).numpy()]


@EX.probe("head-split-scrambled", explains=("test_head_h_is_columns_h", "test_merge_inverts_split"),
          mistaken={"split_heads": scrambled_split})
def probe_split_scrambled(student) -> bool:
    x = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)
    return matches(student.split_heads(x, 2), scrambled_split(x, 2)[0])
