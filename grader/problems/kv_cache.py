"""Exercise `kv_cache`: the causal mask of new queries over cached and new keys, in NumPy."""

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
from ..core.diagnose import matches
from ..core.exercise import Exercise, positive_int
from ..core.strategies import floats_array
from .attention import causal_mask, scaled_dot_product_attention

EX = Exercise("kv_cache", functions=("kv_cache_mask",), framework="numpy", track="core",
              points=15, order=6, title="`kv_cache_mask(n_cached, n_new)`")


# -- reference ----------------------------------------------------------------------------------
@EX.reference
def kv_cache_mask(n_cached, n_new):
    n_cached = positive_int(n_cached, "n_cached", 0)
    n_new = positive_int(n_new, "n_new", 1)
    return torch.ones(n_new, n_cached + n_new, dtype=torch.bool).triu(n_cached + 1).numpy()


# -- strategies ---------------------------------------------------------------------------------
class KV(NamedTuple):
    n_cached: int
    n_new: int


kv_sizes = st.builds(KV, st.integers(0, 6), st.integers(1, 5))


# -- checks -------------------------------------------------------------------------------------
def student_mask(ctx, n_cached, n_new):
    mask = assert_shape(
        ctx.student.kv_cache_mask(n_cached, n_new), (n_new, n_cached + n_new), "the mask"
    )
    if mask.dtype.kind != "b":
        raise CheckFailed(f"the mask has dtype {mask.dtype}, expected bool")
    return mask


@EX.check(points=2, prop="With nothing cached, kv_cache_mask(0, t) is the causal mask.")
@given(t=st.integers(1, 10))
def test_equals_causal_mask_without_cache(ctx, t):
    ctx.show(n_cached=0, n_new=t, drawn=True)
    assert_equal(student_mask(ctx, 0, t), causal_mask(t), "kv_cache_mask(0, t)")


@EX.check(points=1,
       prop="kv_cache_mask(n_cached, n_new) is bool of shape (n_new, n_cached + n_new).")
@given(sizes=kv_sizes)
def test_shape_and_dtype(ctx, sizes):
    student_mask(ctx, *sizes)


@EX.check(points=3, prop="Cached 3, new 2, zero scores, values [10..50]: outputs [25, 30].")
def test_known_values_25_30(ctx):
    ctx.show(n_cached=3, n_new=2)
    mask = student_mask(ctx, 3, 2)
    q, k = np.zeros((2, 2)), np.zeros((5, 2))
    v = np.array([[10.0], [20.0], [30.0], [40.0], [50.0]])
    if mask.all(axis=-1).any():
        raise CheckFailed("some new query has no allowed key", got=mask)
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    assert_close(out.ravel(), [25.0, 30.0], what="the two outputs (10, 15 is the top-left mask)")


@EX.check(points=4, prop="Attention of new queries over cached keys equals the last rows of "
       "full causal attention.")
@given(sizes=kv_sizes, data=st.data())
def test_cached_attention_equals_last_rows_of_full(ctx, sizes, data):
    n_cached, n_new = sizes
    total = n_cached + n_new
    q = data.draw(floats_array(np.float64, (total, 2), -3, 3), label="q")
    k = data.draw(floats_array(np.float64, (total, 2), -3, 3), label="k")
    v = data.draw(floats_array(np.float64, (total, 2), -3, 3), label="v")
    full, _ = scaled_dot_product_attention(q, k, v, causal_mask(total))
    mask = student_mask(ctx, n_cached, n_new)
    if mask.all(axis=-1).any():
        raise CheckFailed("some new query has no allowed key", got=mask)
    cached, _ = scaled_dot_product_attention(q[n_cached:], k, v, mask)
    assert_close(cached, full[n_cached:], what="the new queries' outputs")


@EX.check(points=2, prop="New query i sees all cached keys and new keys 0..i, and nothing later.")
@given(sizes=kv_sizes)
def test_each_new_query_sees_cache_and_earlier_new(ctx, sizes):
    n_cached, n_new = sizes
    mask = student_mask(ctx, n_cached, n_new)
    for i in range(n_new):
        allowed = ~mask[i]
        expected = np.arange(n_cached + n_new) <= n_cached + i
        if not np.array_equal(allowed, expected):
            raise CheckFailed(f"row {i} allows the wrong keys", expected=~expected, got=mask[i])


@EX.check(points=2, prop="n_cached < 0, n_new < 1 or non-integers raise ValueError.")
def test_rejects_bad_arguments(ctx):
    for n_cached, n_new in ((-1, 2), (2, 0), (1.5, 2), (2, 2.0)):
        ctx.show(n_cached=n_cached, n_new=n_new)
        expect_value_error(
            lambda a=n_cached, b=n_new: ctx.student.kv_cache_mask(a, b),
            f"n_cached = {n_cached!r}, n_new = {n_new!r}",
        )


EX.judge_input("kv_cache_mask")


### BEGIN HIDDEN CHECKS
def kv_structures(rng):
    """The kinds of call the visible checks are built on, whatever the course secret, with the
    sizes from ``rng``: nothing cached, one new token after a cache, several after a cache."""
    n_cached, n_new = int(rng.integers(1, 7)), int(rng.integers(2, 6))
    return [{"sizes": KV(0, n_new)}, {"sizes": KV(n_cached, 1)},
            {"sizes": KV(int(rng.integers(1, 7)), int(rng.integers(2, 6)))}]


@EX.check(points=1, hidden=True, cases=kv_structures,
          prop="kv_cache_mask agrees with the answer key.")
@given(sizes=kv_sizes)
def test_kv_cache_matches_answer_key(ctx, sizes):
    assert_equal(ctx.student.kv_cache_mask(*sizes), ctx.key.kv_cache_mask(*sizes), "the mask")
### END HIDDEN CHECKS


# -- misconceptions -----------------------------------------------------------------------------
EX.misconception(
    "kv-cache-upper-left",
    mistake="aligns the causal mask to the top-left of the (n_new, n_cached + n_new) grid",
    hint="new query i is position n_cached + i: align the mask to the end of the keys (block "
         "key j only when j > n_cached + i), not to the top-left corner.",
)


def upper_left(n_cached, n_new):
    """The causal mask of the (n_new, n_cached + n_new) grid aligned to its top left, by
    torch; where the reference refuses the sizes, it does too."""
    kv_cache_mask(n_cached, n_new)
    return [torch.ones(n_new, n_cached + n_new, dtype=torch.bool).triu(1).numpy()]


@EX.probe("kv-cache-upper-left",
          explains=("test_known_values_25_30", "test_cached_attention_equals_last_rows_of_full",
                    "test_each_new_query_sees_cache_and_earlier_new"),
          mistaken={"kv_cache_mask": upper_left})
def probe_upper_left(student) -> bool:
    return matches(student.kv_cache_mask(3, 2), upper_left(3, 2)[0])
