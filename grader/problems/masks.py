"""Bonus exercise `masks`: sliding-window and padding masks, in NumPy."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from ..core.assertions import (
    CheckFailed,
    assert_close,
    assert_equal,
    assert_shape,
    expect_value_error,
)
from ..core.diagnose import mistaken
from ..core.exercise import Exercise
from ..core.plural import counted
from ..core.strategies import floats_array
from .attention import causal_mask, scaled_dot_product_attention

EX = Exercise("masks", functions=("sliding_window_mask", "padding_mask"), framework="numpy",
              track="bonus", points=10, order=7,
              title="`sliding_window_mask(t, window)`, `padding_mask(lengths, t)`")


# -- reference ----------------------------------------------------------------------------------
@EX.reference
def sliding_window_mask(t, window):
    full = torch.ones(t, t, dtype=torch.bool)
    return (full.triu(1) | full.tril(-window)).numpy()


@EX.reference
def padding_mask(lengths, t):
    lengths = torch.as_tensor(np.asarray(lengths))
    return (torch.arange(t)[None, :] >= lengths[:, None])[:, None, None, :].numpy()


# -- strategies ---------------------------------------------------------------------------------
class Window(NamedTuple):
    t: int
    window: int


windows = st.builds(Window, st.integers(1, 8), st.integers(1, 9))


class Padding(NamedTuple):
    lengths: np.ndarray
    t: int


@st.composite
def padding_case(draw, max_batch=3, max_t=6) -> Padding:
    t = draw(st.integers(1, max_t))
    lengths = draw(st.lists(st.integers(1, t), min_size=1, max_size=max_batch))
    return Padding(np.array(lengths, dtype=np.int64), t)


# -- checks -------------------------------------------------------------------------------------
def student_window(ctx, t, window):
    mask = assert_shape(ctx.student.sliding_window_mask(t, window), (t, t), "the window mask")
    if mask.dtype.kind != "b":
        raise CheckFailed(f"the window mask has dtype {mask.dtype}, expected bool")
    return mask


def student_padding(ctx, lengths, t):
    shape = (len(lengths), 1, 1, t)
    mask = ctx.student.padding_mask(lengths, t)
    if t > 1 and getattr(mask, "shape", None) == (len(lengths), 1, t, 1):
        raise CheckFailed(f"the padding mask has shape {mask.shape}, one entry per query; "
                          f"it should hide padded keys: shape {shape}")
    mask = assert_shape(mask, shape, "the padding mask")
    if mask.dtype.kind != "b":
        raise CheckFailed(f"the padding mask has dtype {mask.dtype}, expected bool")
    return mask


@EX.check(points=1, prop="With window 1, each position sees only itself.")
@given(t=st.integers(1, 8))
def test_window_one_sees_only_itself(ctx, t):
    ctx.show(t=t, window=1, drawn=True)
    assert_equal(student_window(ctx, t, 1), ~np.eye(t, dtype=bool), "sliding_window_mask(t, 1)")


@EX.check(points=1, prop="With window >= t, sliding_window_mask(t, window) is causal_mask(t).")
@given(t=st.integers(1, 8), extra=st.integers(0, 3))
def test_large_window_equals_causal_mask(ctx, t, extra):
    ctx.show(t=t, window=t + extra, drawn=True)
    assert_equal(student_window(ctx, t, t + extra), causal_mask(t),
                 f"sliding_window_mask({t}, {t + extra})")


@EX.check(points=2, prop="Row i allows exactly the min(i + 1, window) most recent keys, "
       "itself included, and nothing later.")
@given(case=windows)
def test_each_row_allows_the_most_recent_keys(ctx, case):
    mask = student_window(ctx, *case)
    for i in range(case.t):
        expected = ~sliding_window_mask(case.t, case.window)[i]
        if not np.array_equal(~mask[i], expected):
            # The row as the mask holds it (True: blocked), in the words and the arrays alike.
            allowed = min(i + 1, case.window)
            raise CheckFailed(
                f"row {i} blocks {_keys(mask[i])}, expected {_keys(~expected)}: row i allows "
                f"the min(i + 1, window) = {counted(allowed, 'most recent key')}, "
                f"{_span(i - allowed + 1, i)}, and blocks every other",
                expected=~expected, got=mask[i])


def _keys(blocked: np.ndarray) -> str:
    """The keys a mask row blocks, by position: "no key", "key 0", "keys 0, 2 and 3"."""
    where = [str(j) for j in np.flatnonzero(blocked)]
    if not where:
        return "no key"
    return (f"key {where[0]}" if len(where) == 1
            else f"keys {', '.join(where[:-1])} and {where[-1]}")


def _span(first: int, last: int) -> str:
    return f"key {first}" if first == last else f"keys {first}..{last}"


@EX.check(points=1, prop="padding_mask(lengths, t) is bool (B, 1, 1, t), True exactly at key "
       "positions j >= lengths[b].")
@given(case=padding_case())
def test_padding_mask_blocks_keys_past_each_length(ctx, case):
    assert_equal(student_padding(ctx, *case), padding_mask(*case),
                 "the padding mask")


@EX.check(points=1, prop="In attention with the padding mask (alone or with a causal mask), "
       "padding keys get zero weight.")
@given(case=padding_case(), causal=st.booleans(), data=st.data())
def test_padding_keys_get_zero_weight(ctx, case, causal, data):
    lengths, t = case
    mask = student_padding(ctx, lengths, t)
    if causal:
        mask = mask | causal_mask(t)
    q = data.draw(floats_array(np.float64, (len(lengths), 2, t, 2), -3, 3), label="q")
    k = data.draw(floats_array(np.float64, (len(lengths), 2, t, 2), -3, 3), label="k")
    _, weights = scaled_dot_product_attention(q, k, k, mask)
    for b, length in enumerate(lengths):
        if (weights[b, :, :, length:] != 0).any():
            raise CheckFailed(f"sequence {b} (length {length}) gives weight to a padding key",
                              got=weights[b])


@EX.check(points=2, prop="The real positions of a padded batch get the outputs of causal "
       "attention over each sequence alone, unpadded.")
@given(case=padding_case(), data=st.data())
def test_padded_rows_match_unpadded_computation(ctx, case, data):
    lengths, t = case
    mask = student_padding(ctx, lengths, t) | causal_mask(t)
    q, k, v = (data.draw(floats_array(np.float64, (len(lengths), 2, t, 2), -3, 3), label=n)
               for n in "qkv")
    batched, _ = scaled_dot_product_attention(q, k, v, mask)
    for b, n in enumerate(lengths):
        alone, _ = scaled_dot_product_attention(
            q[b, :, :n], k[b, :, :n], v[b, :, :n], causal_mask(int(n)))
        assert_close(batched[b, :, :n], alone, what=f"sequence {b}'s outputs (length {n})")


@EX.check(points=1, prop="t < 1, window < 1, or a length outside 1..t raise ValueError.")
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


EX.judge_input("sliding_window_mask")
EX.judge_input("padding_mask")


### BEGIN HIDDEN CHECKS
def masks_structures(rng):
    """The kinds of call the visible checks are built on, whatever the course secret, with the
    sizes from ``rng``: a window of 1, one shorter than the sequence and one as long or longer;
    one padded sequence, three of which one is not padded, and two of which one is."""
    def ints(low, high):  # low..high, both included
        return int(rng.integers(low, high + 1))

    short, long = ints(4, 8), ints(1, 8)
    window_cases = [Window(ints(2, 8), 1), Window(short, ints(2, short - 1)),
                    Window(long, ints(long, 9))]
    t = ints(3, 6)
    padding_cases = [Padding(rng.permutation(np.array(lengths, dtype=np.int64)), length)
                     for lengths, length in (([ints(1, 5)], 6),
                                             ([t, ints(1, t - 1), ints(1, t - 1)], t),
                                             ([ints(1, 2), 3], 3))]
    return [{"window": w, "padding": p} for w, p in zip(window_cases, padding_cases)]


@EX.check(points=1, hidden=True, cases=masks_structures,
          prop="sliding_window_mask and padding_mask agree with the answer key.")
@given(window=windows, padding=padding_case())
def test_masks_match_answer_key(ctx, window, padding):
    assert_equal(ctx.student.sliding_window_mask(*window), ctx.key.sliding_window_mask(*window),
                 "sliding_window_mask")
    assert_equal(ctx.student.padding_mask(*padding), ctx.key.padding_mask(*padding),
                 "padding_mask")
### END HIDDEN CHECKS


# -- misconceptions -----------------------------------------------------------------------------
EX.misconception(
    "window-off-by-one",
    mistake="the sliding window lets a query see window + 1 or window - 1 keys",
    hint="a window of w keeps the w most recent keys, the query's own position included: block "
         "key j when j > i or j <= i - w.",
)
EX.misconception(
    "padding-on-queries",
    mistake="hides padded queries instead of padded keys",
    hint="padding belongs to the keys: the mask has shape (B, 1, 1, T) and blocks key positions "
         "j >= lengths[b] for every query.",
)


def window_of(t, keys):
    """Each query sees the ``keys`` most recent keys (none when 0), by torch."""
    i, j = torch.arange(t)[:, None], torch.arange(t)[None, :]
    return ((j > i) | (j <= i - keys)).numpy()


def off_by_one(t, window):
    """The window of ``window + 1`` keys and of ``window - 1``; where the reference refuses
    the sizes, they do too."""
    sliding_window_mask(t, window)
    return [window_of(t, window + 1), window_of(t, window - 1)]


def on_queries(lengths, t):
    """The padded queries hidden, not the keys: (B, 1, T, 1), or broadcast to (B, 1, T, T),
    by torch; where the reference refuses the lengths, it does too."""
    keys = torch.from_numpy(padding_mask(lengths, t))
    queries = keys.transpose(-1, -2)
    return [queries.numpy(), queries.expand(-1, -1, -1, t).numpy()]


@EX.probe("window-off-by-one",
          explains=("test_window_one_sees_only_itself",
                    "test_each_row_allows_the_most_recent_keys"),
          mistaken={"sliding_window_mask": off_by_one})
def probe_window_off_by_one(student) -> bool:
    t = 6
    for window in (2, 3):
        got = student.sliding_window_mask(t, window)
        correct = sliding_window_mask(t, window)
        if not (mistaken(got, correct, sliding_window_mask(t, window + 1))
                or mistaken(got, correct, sliding_window_mask(t, window - 1))):
            return False
    return True


@EX.probe("padding-on-queries",
          explains=("test_padding_mask_blocks_keys_past_each_length",
                    "test_padding_keys_get_zero_weight",
                    "test_padded_rows_match_unpadded_computation"),
          mistaken={"padding_mask": on_queries})
def probe_padding_on_queries(student) -> bool:
    lengths = np.array([2, 4, 3])
    got = np.asarray(student.padding_mask(lengths, 4))
    correct = padding_mask(lengths, 4)
    on_queries = np.swapaxes(correct, -1, -2)  # (B, 1, T, 1): padded queries hidden
    try:
        shown = np.broadcast_to(got, (3, 1, 4, 4))
    except ValueError:
        return False
    return mistaken(shown, np.broadcast_to(correct, (3, 1, 4, 4)),
                    np.broadcast_to(on_queries, (3, 1, 4, 4)))
