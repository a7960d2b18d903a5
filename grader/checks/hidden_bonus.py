"""Hidden checks for the bonus exercises: the submission against the answer key, on the same
generated inputs. Like ``hidden.py``, this file stays on the instructor's side."""

import numpy as np
from hypothesis import given

from ..assertions import assert_close, assert_equal
from ..registry import check
from ..strategies_bonus import (
    attention_grad_case,
    decode_case,
    gqa_case,
    padding_case,
    split_chunks,
    windows,
)


@check("masks", points=1, hidden=True,
       prop="sliding_window_mask and padding_mask agree with the answer key.")
@given(window=windows, padding=padding_case())
def test_masks_match_answer_key(ctx, window, padding):
    assert_equal(ctx.student.sliding_window_mask(*window), ctx.key.sliding_window_mask(*window),
                 "sliding_window_mask")
    assert_equal(ctx.student.padding_mask(*padding), ctx.key.padding_mask(*padding),
                 "padding_mask")


@check("attention_backward", points=1, hidden=True,
       prop="attention_backward agrees with the answer key.")
@given(case=attention_grad_case())
def test_attention_backward_matches_answer_key(ctx, case):
    for name, got, expected in zip(("dq", "dk", "dv"), ctx.student.attention_backward(*case),
                                   ctx.key.attention_backward(*case)):
        assert_close(got, expected, what=name)


@check("gqa", points=1, hidden=True, prop="GroupedQueryAttention agrees with the answer key.")
@given(case=gqa_case())
def test_gqa_matches_answer_key(ctx, case):
    got, expected = ctx.student.gqa_forward(*case), ctx.key.gqa_forward(*case)
    for name in ("y", "weights"):
        assert_close(got[name], expected[name], dtype=case.x.dtype, what=name)


@check("decode", points=1, hidden=True, prop="decode_step agrees with the answer key.")
@given(case=decode_case())
def test_decode_matches_answer_key(ctx, case):
    xs = split_chunks(case.x, case.chunks)
    args = (case.d_model, case.n_head, case.bias, case.state, xs)
    got, expected = ctx.student.decode_run(*args), ctx.key.decode_run(*args)
    assert_close(np.concatenate(got["ys"], axis=1), np.concatenate(expected["ys"], axis=1),
                 dtype=case.x.dtype, what="the decoded outputs")
