"""Exercise `attention`: the causal mask and masked scaled dot-product attention, in NumPy."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from ..core.assertions import (
    CheckFailed,
    assert_close,
    assert_equal,
    assert_matches_key,
    assert_shape,
    digits_to_tell_apart,
    expect_value_error,
)
from ..core.diagnose import (
    FULLY_MASKED2,
    FULLY_MASKED_MISTAKES,
    MASK3,
    attention_with,
    grid,
    matches,
    mistaken,
)
from ..core.exercise import Exercise, positive_int
from ..core.strategies import (
    Attention,
    attention_case,
    causal,
    grid_array,
    telling_mask,
)

EX = Exercise("attention", functions=("causal_mask", "scaled_dot_product_attention"),
              framework="numpy", track="core", points=20, order=3, uses=("softmax",),
              title="`causal_mask(t)`, `scaled_dot_product_attention(q, k, v, mask=None)`")


# -- reference ----------------------------------------------------------------------------------
@EX.reference
def causal_mask(t):
    t = positive_int(t, "t", 1)
    return torch.ones(t, t, dtype=torch.bool).triu(1).numpy()


@EX.reference
def scaled_dot_product_attention(q, k, v, mask=None):
    """torch's matmul and softmax, with the exercise's checks; NumPy in, NumPy out (or torch)."""
    as_numpy = not isinstance(q, torch.Tensor)
    tq, tk, tv = (torch.as_tensor(np.asarray(a)) if as_numpy else a for a in (q, k, v))
    if tq.shape[-1] != tk.shape[-1]:
        raise ValueError(f"q width {tq.shape[-1]} differs from k width {tk.shape[-1]}")
    if tk.shape[-2] != tv.shape[-2]:
        raise ValueError(f"k has {tk.shape[-2]} positions but v has {tv.shape[-2]}")
    scores = torch.matmul(tq, tk.transpose(-2, -1)) * tq.shape[-1] ** -0.5
    blocked = None if mask is None else torch.as_tensor(
        np.asarray(mask) if as_numpy else mask, device=scores.device)
    if blocked is not None:
        if blocked.dtype != torch.bool:
            raise ValueError(f"the mask must be boolean (True = blocked), not {blocked.dtype}")
        scores = scores.masked_fill(blocked, float("-inf"))
    if torch.isneginf(scores).all(-1).any():
        raise ValueError("some query has no allowed key (its mask row is all True)")
    weights = scores.softmax(dim=-1)
    output = torch.matmul(weights, tv.to(weights.dtype))
    return (output.numpy(), weights.numpy()) if as_numpy else (output, weights)


# -- checks -------------------------------------------------------------------------------------
def torch_reference(case: Attention):
    """Output by F.scaled_dot_product_attention (its bool mask means *allowed*), and weights."""
    q, k, v = (torch.from_numpy(a.astype(np.float64)) for a in (case.q, case.k, case.v))
    allowed = None if case.mask is None else ~torch.from_numpy(case.mask)
    output = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=0.0)
    return output.numpy(), scaled_dot_product_attention(*case)[1]


def student_attention(ctx, case: Attention):
    result = ctx.student.scaled_dot_product_attention(case.q, case.k, case.v, mask=case.mask)
    if not isinstance(result, tuple) or len(result) != 2:
        raise CheckFailed("scaled_dot_product_attention must return a tuple (output, weights)")
    out, weights = result
    batch = np.broadcast_shapes(case.q.shape[:-2], case.k.shape[:-2])
    if case.mask is not None:
        batch = np.broadcast_shapes(batch, case.mask.shape[:-2])
    tq, tk, dv = case.q.shape[-2], case.k.shape[-2], case.v.shape[-1]
    assert_shape(out, (*batch, tq, dv), "the output")
    assert_shape(weights, (*batch, tq, tk), "the weights")
    return out, weights


@EX.check(points=2, prop="causal_mask(t) blocks exactly the future: [i, j] is True iff j > i.")
@given(t=st.integers(1, 12))
def test_causal_mask_blocks_exactly_the_future(ctx, t):
    got = ctx.student.causal_mask(t)
    assert_equal(got, torch.ones(t, t, dtype=torch.bool).triu(1).numpy(), "causal_mask(t)")


@EX.check(points=1, prop="causal_mask(t) raises ValueError unless t is a positive integer.")
def test_causal_mask_rejects_bad_t(ctx):
    for t in (0, -2, 2.5):
        ctx.show(t=t)
        expect_value_error(lambda t=t: ctx.student.causal_mask(t), f"t = {t!r}")


@EX.check(points=3,
          prop="Output and weights match F.scaled_dot_product_attention (mask inverted).")
@given(case=attention_case())
def test_matches_torch_sdpa(ctx, case):
    expected_out, expected_weights = torch_reference(case)
    out, weights = student_attention(ctx, case)
    assert_close(weights, expected_weights, dtype=case.q.dtype, what="the weights")
    assert_close(out, expected_out, dtype=case.q.dtype, what="the output")


@EX.check(points=1, prop="Every row of the weights sums to 1.")
@given(case=attention_case())
def test_rows_sum_to_one(ctx, case):
    _, weights = student_attention(ctx, case)
    sums = weights.astype(np.float64).sum(-1)
    assert_close(sums, np.ones_like(sums), dtype=case.q.dtype, what="the row sums")


@EX.check(points=2, prop="Blocked positions (mask True) get exactly zero weight.")
@given(case=attention_case(with_mask=True))
def test_zero_weight_on_blocked_positions(ctx, case):
    _, weights = student_attention(ctx, case)
    blocked = np.broadcast_to(case.mask, weights.shape)
    if (weights[blocked] != 0).any():
        raise CheckFailed("a blocked position got non-zero weight", expected=blocked * 0.0,
                          got=np.where(blocked, weights, 0))


@EX.check(points=1, prop="Query rows whose scores differ by thousands are each normalised on "
                        "their own (no overflow, no 0 / 0).")
@given(case=attention_case(dtypes=(np.float64,), with_mask=False))
def test_stable_for_rows_of_different_magnitude(ctx, case):
    first = Attention(np.array([[1000.0], [1.0]]), np.array([[1.0], [0.0]]),
                      np.array([[1.0], [2.0]]), None)
    # Every other query row scaled by 1000: its scores are thousands, its neighbours' a few.
    spread = case._replace(q=case.q * 1000.0 ** (np.arange(case.q.shape[-2]) % 2)[:, None])
    for shown in (first, spread):
        ctx.show(case=shown, drawn=shown is spread)  # the input actually used
        expected_out, expected_weights = torch_reference(shown)
        out, weights = student_attention(ctx, shown)
        assert_close(weights, expected_weights, what="the weights")
        assert_close(out, expected_out, what="the output")


@EX.check(points=1, prop="Each output lies within the range of the values it averages.")
@given(case=attention_case(dtypes=(np.float64,)))
def test_output_is_convex_combination_of_values(ctx, case):
    out, _ = student_attention(ctx, case)
    v = np.broadcast_to(case.v, (*out.shape[:-2], *case.v.shape[-2:]))
    low = np.broadcast_to(v.min(axis=-2, keepdims=True), out.shape)
    high = np.broadcast_to(v.max(axis=-2, keepdims=True), out.shape)
    outside = ~((out >= low - 1e-9) & (out <= high + 1e-9))
    if outside.any():
        i = tuple(int(n) for n in np.argwhere(outside)[0])
        digits = max(digits_to_tell_apart(out[i], low[i]), digits_to_tell_apart(out[i], high[i]))
        raise CheckFailed(f"the output at index {i} is {out[i]:.{digits}g}, outside the range "
                          f"[{low[i]:.{digits}g}, {high[i]:.{digits}g}] of the values it "
                          "averages", got=out)


@EX.check(points=1, prop="Permuting the queries permutes the outputs the same way.")
@given(case=attention_case(dtypes=(np.float64,), with_mask=False), data=st.data())
def test_permuting_queries_permutes_outputs(ctx, case, data):
    perm = np.array(data.draw(st.permutations(range(case.q.shape[-2])), label="perm"))
    out, _ = student_attention(ctx, case)
    permuted, _ = student_attention(ctx, case._replace(q=case.q[..., perm, :]))
    assert_close(permuted, out[..., perm, :], what="the output for permuted queries")


@EX.check(points=1, prop="Permuting keys together with values changes nothing.")
@given(case=attention_case(dtypes=(np.float64,), with_mask=False), data=st.data())
def test_permuting_keys_with_values_changes_nothing(ctx, case, data):
    perm = np.array(data.draw(st.permutations(range(case.k.shape[-2])), label="perm"))
    out, _ = student_attention(ctx, case)
    moved = case._replace(k=case.k[..., perm, :], v=case.v[..., perm, :])
    permuted, _ = student_attention(ctx, moved)
    assert_close(permuted, out, what="the output for permuted keys and values")


@EX.check(points=2, prop="With a causal mask no query puts weight on, or reads, a later position.")
@given(case=attention_case(dtypes=(np.float64,), with_mask=False), data=st.data())
def test_no_weight_on_future_positions(ctx, case, data):
    t = min(case.q.shape[-2], case.k.shape[-2])
    case = case._replace(q=case.q[..., :t, :], k=case.k[..., :t, :], v=case.v[..., :t, :],
                         mask=causal_mask(t))
    ctx.example["case"] = case  # show the input actually used
    out, weights = student_attention(ctx, case)
    if np.triu(weights, k=1).any():
        raise CheckFailed("a query put weight on a later position", got=weights)
    last = data.draw(st.integers(0, t - 1), label="changed position")
    changed = case.v.copy()
    changed[..., last, :] += 5.0
    out2, _ = student_attention(ctx, case._replace(v=changed))
    assert_close(out2[..., :last, :], out[..., :last, :], what="outputs before the changed one")


@EX.check(points=1, prop="A (Tq, Tk) mask broadcasts over the batch and head axes.")
@given(case=attention_case(dtypes=(np.float64,), with_mask=True, max_batch_dims=2))
def test_mask_broadcasts(ctx, case):
    mask2d = case.mask.reshape(-1, *case.mask.shape[-2:])[0]
    case = case._replace(mask=mask2d)
    ctx.example["case"] = case  # show the input actually used
    _, expected = scaled_dot_product_attention(*case)
    _, weights = student_attention(ctx, case)
    assert_close(weights, expected, what="the weights")


@EX.check(points=1, prop="Mismatched q/k widths or k/v lengths raise ValueError.")
def test_rejects_mismatched_shapes(ctx):
    bad = {
        "q width 3 but k width 2": (np.ones((2, 3)), np.ones((4, 2)), np.ones((4, 2))),
        "k with 4 positions but v with 3": (np.ones((2, 2)), np.ones((4, 2)), np.ones((3, 2))),
    }
    for what, (q, k, v) in bad.items():
        ctx.show(q=q, k=k, v=v)
        expect_value_error(lambda q=q, k=k, v=v: ctx.student.scaled_dot_product_attention(q, k, v),
                           what)


@EX.check(points=1, prop="A mask that is not boolean raises ValueError.")
def test_rejects_non_boolean_mask(ctx):
    q = k = v = np.ones((2, 2))
    for mask in (np.array([[0, 1], [0, 0]]), np.array([[0.0, 1.0], [0.0, 0.0]])):
        ctx.show(q=q, k=k, v=v, mask=mask)
        expect_value_error(
            lambda m=mask: ctx.student.scaled_dot_product_attention(q, k, v, mask=m),
            f"a mask of dtype {mask.dtype}",
        )


@EX.check(points=1, prop="A query with no allowed key raises ValueError (never silent NaN).")
def test_rejects_query_with_no_allowed_key(ctx):
    q = k = v = np.zeros((2, 2))
    mask = np.array([[False, True], [True, True]])
    ctx.show(q=q, k=k, v=v, mask=mask)
    expect_value_error(
        lambda: ctx.student.scaled_dot_product_attention(q, k, v, mask=mask),
        "mask [[False, True], [True, True]] (query 1 sees nothing)",
    )


EX.judge_input("causal_mask")
EX.judge_input("scaled_dot_product_attention")


### BEGIN HIDDEN CHECKS
def attention_structures(rng):
    """The inputs the visible checks are built on, whatever the course secret, with values
    from ``rng``: no mask, the causal mask, one (Tq, Tk) mask for two batch axes, a mask per
    batch entry and one per (batch, head); d_v != d_k; float32 and float64."""
    cases = []
    for dtype, batch, (tq, tk, dk, dv), mask_kind in (
        (np.float64, (2, 1), (1, 4, 3, 2), None),
        (np.float32, (), (3, 3, 2, 2), "causal"),
        (np.float32, (2, 2), (2, 3, 3, 1), "broadcast"),
        (np.float64, (2,), (3, 4, 2, 3), "per batch entry"),
        (np.float64, (2, 2), (4, 3, 1, 2), "per batch entry"),
    ):
        q, k, v = (grid_array(rng, dtype, (*batch, t, d)) for t, d in
                   ((tq, dk), (tk, dk), (tk, dv)))
        mask = None
        if mask_kind == "causal":
            mask = causal(tq)
        elif mask_kind is not None:
            mask = telling_mask(rng, (tq, tk) if mask_kind == "broadcast" else (*batch, tq, tk))
        cases.append({"case": Attention(q, k, v, mask)})
    return cases


@EX.check(points=1, hidden=True, cases=attention_structures,
          prop="scaled_dot_product_attention agrees with the answer key.")
@given(case=attention_case())
def test_attention_matches_answer_key(ctx, case):
    got = ctx.student.scaled_dot_product_attention(*case)
    expected = ctx.key.scaled_dot_product_attention(*case)
    assert_matches_key(got, expected, dtype=case.q.dtype, what="(output, weights)",
                       parts=("the output", "the weights"))
### END HIDDEN CHECKS


# -- misconceptions -----------------------------------------------------------------------------
EX.misconception(
    "mask-after-softmax",
    mistake="zeroes the blocked weights after the softmax, so rows no longer sum to 1",
    hint="apply the mask to the scores (blocked -> -inf) before the softmax; the softmax then "
         "gives blocked keys exactly 0 and the allowed ones still sum to 1.",
)
EX.misconception(
    "mask-polarity",
    mistake="treats True as allowed (torch's SDPA convention) instead of blocked",
    hint="in this kit True means blocked: fill the scores with -inf where the mask is True "
         "(np.where(mask, -np.inf, scores) or masked_fill(mask, -inf)).",
)
EX.misconception(
    "causal-mask-diagonal",
    mistake="the causal mask blocks the diagonal, so a position cannot see itself",
    hint="a position may attend to itself: block only j > i, i.e. np.triu(..., k=1), not k=0.",
)
EX.misconception(
    "scale-missing",
    mistake="leaves out the 1/sqrt(d_k) scale of the scores",
    hint="divide the scores q @ k^T by sqrt(d_k), the width of q and k: unscaled dot products "
         "grow with the width and push the softmax towards one-hot weights.",
)
EX.misconception(
    "scale-by-d-v",
    mistake="scales the scores by 1/sqrt(d_v), the width of the values, instead of 1/sqrt(d_k)",
    hint="the scores are dot products over the d_k columns of q and k: divide by "
         "sqrt(q.shape[-1]), whatever the width of v.",
)


def attention_matches(student, mask, **mistake) -> bool:
    q, k, v = 2.0 * grid(3, 2), 2.0 * grid(3, 2)[::-1], grid(3, 2) + 1.0
    if mask.shape[-1] == 2:
        q, k, v = q[:2], k[:2], v[:2]
    out, weights = student.scaled_dot_product_attention(q, k, v, mask=mask)
    wrong = attention_with(q, k, v, mask, **mistake)
    return matches(weights, wrong[1]) and matches(out, wrong[0])


def scale_matches(student, scale_of) -> bool:
    """d_k = 3 and d_v = 2: 1/sqrt(3), 1, 1/sqrt(2) and 1/3 all give different weights."""
    q, k, v = 1.5 * grid(3, 3), 1.5 * grid(4, 3)[::-1], grid(4, 2) + 1.0
    out, weights = student.scaled_dot_product_attention(q, k, v)
    wrong = attention_with(q, k, v, scale=scale_of(q, v))
    right = attention_with(q, k, v)
    return mistaken(weights, right[1], wrong[1]) and matches(out, wrong[0])


def mistaken_attention(**mistake):
    """The mistaken version of scaled_dot_product_attention, for ``EX.probe(mistaken=...)``."""
    def version(q, k, v, mask=None):
        return [attention_with(*(np.asarray(a) for a in (q, k, v)),
                               None if mask is None else np.asarray(mask), **mistake)]
    return {"scaled_dot_product_attention": version}


def mistaken_fully_masked(q, k, v, mask=None):
    return [answer for m in FULLY_MASKED_MISTAKES
            for answer in mistaken_attention(**m)["scaled_dot_product_attention"](q, k, v, mask)]


@EX.probe("fully-masked-row", explains=("test_rejects_query_with_no_allowed_key",),
          mistaken={"scaled_dot_product_attention": mistaken_fully_masked})
def probe_fully_masked(student) -> bool:
    return any(attention_matches(student, FULLY_MASKED2, **m) for m in FULLY_MASKED_MISTAKES)


@EX.probe("mask-after-softmax",
          explains=("test_matches_torch_sdpa", "test_rows_sum_to_one", "test_mask_broadcasts",
                    "test_rejects_query_with_no_allowed_key"),
          mistaken=mistaken_attention(when="after"))
def probe_mask_after(student) -> bool:
    return attention_matches(student, MASK3, when="after")


@EX.probe("mask-polarity",
          explains=("test_matches_torch_sdpa", "test_rows_sum_to_one",
                    "test_zero_weight_on_blocked_positions",
                    "test_output_is_convex_combination_of_values",
                    "test_no_weight_on_future_positions", "test_mask_broadcasts",
                    "test_rejects_query_with_no_allowed_key"),
          mistaken={"scaled_dot_product_attention": lambda q, k, v, mask=None: [
              scaled_dot_product_attention(q, k, v, None if mask is None else ~np.asarray(mask))]})
def probe_mask_polarity(student) -> bool:
    return attention_matches(student, MASK3, polarity=False)


@EX.probe("causal-mask-diagonal", explains=("test_causal_mask_blocks_exactly_the_future",),
          mistaken={"causal_mask": lambda t: [np.triu(np.ones((t, t), dtype=bool), k=0)]})
def probe_causal_mask_diagonal(student) -> bool:
    return matches(student.causal_mask(4), np.triu(np.ones((4, 4), dtype=bool), k=0))


def globally_shifted(q, k, v, mask=None):
    """Attention whose softmax subtracts one maximum, of all the scores (or of each query-key
    matrix's), in torch: a row far below it underflows to 0 / 0. It refuses what the
    reference refuses."""
    scaled_dot_product_attention(q, k, v, mask)
    tq, tk, tv = (torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    scores = tq @ tk.transpose(-2, -1) / tq.shape[-1] ** 0.5
    scores = scores if mask is None else scores.masked_fill(
        torch.from_numpy(np.asarray(mask)), float("-inf"))
    answers = []
    for top in (scores.max(), scores.amax(dim=(-2, -1), keepdim=True)):
        e = (scores - top).exp()
        weights = e / e.sum(dim=-1, keepdim=True)
        answers.append(((weights @ tv).numpy(), weights.numpy()))
    return answers


@EX.probe("softmax-global-shift", explains=("test_stable_for_rows_of_different_magnitude",),
          mistaken={"scaled_dot_product_attention": globally_shifted})
def probe_global_shift(student) -> bool:
    # The first query's scores are near a thousand, the second's near 0: one shift for all of
    # them underflows the second row to 0 / 0.
    q, k, v = np.array([[4000.0, 2500.0], [0.5, -0.5]]), grid(3, 2), grid(3, 2) + 1.0
    out, weights = student.scaled_dot_product_attention(q, k, v)
    wrong_out, wrong = globally_shifted(q, k, v)[0]
    return matches(weights, wrong) and matches(out, wrong_out)


@EX.probe("scale-missing",
          explains=("test_matches_torch_sdpa", "test_stable_for_rows_of_different_magnitude",
                    "test_mask_broadcasts"),
          mistaken=mistaken_attention(scale=1.0))
def probe_scale_missing(student) -> bool:
    return scale_matches(student, lambda q, v: 1.0)


@EX.probe("scale-by-d-v",
          explains=("test_matches_torch_sdpa", "test_stable_for_rows_of_different_magnitude",
                    "test_mask_broadcasts"),
          mistaken={"scaled_dot_product_attention": lambda q, k, v, mask=None: mistaken_attention(
              scale=np.shape(v)[-1] ** -0.5)["scaled_dot_product_attention"](q, k, v, mask)})
def probe_scale_by_d_v(student) -> bool:
    return scale_matches(student, lambda q, v: 1 / np.sqrt(v.shape[-1]))
