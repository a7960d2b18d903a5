"""Hidden checks: the submission against the answer key, on the same generated inputs.

Students see each check's property and the failing input, never the key's code. These run
only where ``solutions/`` is present (the instructor's side); the handout leaves this file out.
"""

import numpy as np
from hypothesis import given

from ..assertions import assert_close, assert_equal
from ..registry import check
from ..strategies import (
    attention_case,
    backward_case,
    heads_case,
    kv_sizes,
    logits_and_axis,
    mha_case,
)


def same(got, expected, dtype=np.float64, what="the result"):
    if isinstance(expected, tuple):
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_close(g, e, dtype=dtype, what=f"{what} [{i}]")
    else:
        assert_close(got, expected, dtype=dtype, what=what)


@check("softmax", points=1, hidden=True, prop="softmax agrees with the answer key.")
@given(case=logits_and_axis())
def test_softmax_matches_answer_key(ctx, case):
    same(ctx.student.softmax(*case), ctx.key.softmax(*case), case.logits.dtype)


@check("softmax_backward", points=1, hidden=True,
       prop="softmax_backward agrees with the answer key.")
@given(case=backward_case())
def test_softmax_backward_matches_answer_key(ctx, case):
    same(ctx.student.softmax_backward(*case), ctx.key.softmax_backward(*case))


@check("attention", points=1, hidden=True,
       prop="scaled_dot_product_attention agrees with the answer key.")
@given(case=attention_case())
def test_attention_matches_answer_key(ctx, case):
    same(ctx.student.scaled_dot_product_attention(*case),
         ctx.key.scaled_dot_product_attention(*case), case.q.dtype, "(output, weights)")


@check("heads", points=1, hidden=True,
       prop="split_heads and merge_heads agree with the answer key.")
@given(case=heads_case())
def test_heads_match_answer_key(ctx, case):
    assert_equal(ctx.student.split_heads(*case), ctx.key.split_heads(*case), "split_heads")
    y = ctx.key.split_heads(*case)
    assert_equal(ctx.student.merge_heads(y), ctx.key.merge_heads(y), "merge_heads")


@check("mha", points=2, hidden=True, prop="MultiHeadAttention agrees with the answer key.")
@given(case=mha_case())
def test_mha_matches_answer_key(ctx, case):
    got = ctx.student.mha_forward(*case)
    expected = ctx.key.mha_forward(*case)
    for name in ("y", "weights"):
        assert_close(got[name], expected[name], dtype=case.x.dtype, what=name)


@check("kv_cache", points=1, hidden=True, prop="kv_cache_mask agrees with the answer key.")
@given(sizes=kv_sizes)
def test_kv_cache_matches_answer_key(ctx, sizes):
    assert_equal(ctx.student.kv_cache_mask(*sizes), ctx.key.kv_cache_mask(*sizes), "the mask")
