"""Checks for the bonus exercise `masks`: sliding windows and padding in batches."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from .. import reference, reference_bonus
from ..assertions import CheckFailed, assert_close, assert_equal, assert_shape, expect_value_error
from ..registry import check
from ..strategies import floats_array
from ..strategies_bonus import padding_case, windows

EX = "masks"


def student_window(ctx, t, window):
    mask = assert_shape(ctx.student.sliding_window_mask(t, window), (t, t), "the window mask")
    if mask.dtype != np.bool_:
        raise CheckFailed(f"the window mask has dtype {mask.dtype}, expected bool")
    return mask


def student_padding(ctx, lengths, t):
    shape = (len(lengths), 1, 1, t)
    mask = ctx.student.padding_mask(lengths, t)
    if t > 1 and getattr(mask, "shape", None) == (len(lengths), 1, t, 1):
        raise CheckFailed(f"the padding mask has shape {mask.shape}, one entry per query; "
                          f"it should hide padded keys: shape {shape}")
    mask = assert_shape(mask, shape, "the padding mask")
    if mask.dtype != np.bool_:
        raise CheckFailed(f"the padding mask has dtype {mask.dtype}, expected bool")
    return mask


@check(EX, points=1, prop="With window 1, each position sees only itself.")
@given(t=st.integers(1, 8))
def test_window_one_sees_only_itself(ctx, t):
    assert_equal(student_window(ctx, t, 1), ~np.eye(t, dtype=bool), "sliding_window_mask(t, 1)")


@check(EX, points=1, prop="With window >= t, sliding_window_mask(t, window) is causal_mask(t).")
@given(t=st.integers(1, 8), extra=st.integers(0, 3))
def test_large_window_equals_causal_mask(ctx, t, extra):
    assert_equal(student_window(ctx, t, t + extra), reference.causal_mask(t),
                 f"sliding_window_mask({t}, {t + extra})")


@check(EX, points=2, prop="Row i allows exactly the min(i + 1, window) most recent keys, "
       "itself included, and nothing later.")
@given(case=windows)
def test_each_row_allows_the_most_recent_keys(ctx, case):
    mask = student_window(ctx, *case)
    for i in range(case.t):
        expected = ~reference_bonus.sliding_window_mask(case.t, case.window)[i]
        if not np.array_equal(~mask[i], expected):
            raise CheckFailed(
                f"row {i} allows {int((~mask[i]).sum())} keys, expected "
                f"min(i + 1, window) = {min(i + 1, case.window)}: keys {i - expected.sum() + 1}"
                f"..{i}", expected=~expected, got=mask[i])


@check(EX, points=1, prop="padding_mask(lengths, t) is bool (B, 1, 1, t), True exactly at key "
       "positions j >= lengths[b].")
@given(case=padding_case())
def test_padding_mask_blocks_keys_past_each_length(ctx, case):
    assert_equal(student_padding(ctx, *case), reference_bonus.padding_mask(*case),
                 "the padding mask")


@check(EX, points=1, prop="In attention with the padding mask (alone or with a causal mask), "
       "padding keys get zero weight.")
@given(case=padding_case(), causal=st.booleans(), data=st.data())
def test_padding_keys_get_zero_weight(ctx, case, causal, data):
    lengths, t = case
    mask = student_padding(ctx, lengths, t)
    if causal:
        mask = mask | reference.causal_mask(t)
    q = data.draw(floats_array(np.float64, (len(lengths), 2, t, 2), -3, 3), label="q")
    k = data.draw(floats_array(np.float64, (len(lengths), 2, t, 2), -3, 3), label="k")
    _, weights = reference.scaled_dot_product_attention(q, k, k, mask)
    for b, length in enumerate(lengths):
        if (weights[b, :, :, length:] != 0).any():
            raise CheckFailed(f"sequence {b} (length {length}) gives weight to a padding key",
                              got=weights[b])


@check(EX, points=2, prop="The real positions of a padded batch get the outputs of causal "
       "attention over each sequence alone, unpadded.")
@given(case=padding_case(), data=st.data())
def test_padded_rows_match_unpadded_computation(ctx, case, data):
    lengths, t = case
    mask = student_padding(ctx, lengths, t) | reference.causal_mask(t)
    q, k, v = (data.draw(floats_array(np.float64, (len(lengths), 2, t, 2), -3, 3), label=n)
               for n in "qkv")
    batched, _ = reference.scaled_dot_product_attention(q, k, v, mask)
    for b, n in enumerate(lengths):
        alone, _ = reference.scaled_dot_product_attention(
            q[b, :, :n], k[b, :, :n], v[b, :, :n], reference.causal_mask(int(n)))
        assert_close(batched[b, :, :n], alone, what=f"sequence {b}'s outputs (length {n})")


@check(EX, points=1, prop="t < 1, window < 1, or a length outside 1..t raise ValueError.")
def test_rejects_invalid_sizes(ctx):
    for t, window in ((0, 1), (3, 0), (2, -1)):
        ctx.show(t=t, window=window)
        expect_value_error(lambda t=t, w=window: ctx.student.sliding_window_mask(t, w),
                           f"sliding_window_mask({t}, {window})")
    for lengths, t in (([0, 2], 3), ([2, 4], 3)):
        ctx.show(lengths=np.array(lengths), t=t)
        array = np.array(lengths)
        expect_value_error(lambda a=array, t=t: ctx.student.padding_mask(a, t),
                           f"padding_mask({lengths}, {t})")
