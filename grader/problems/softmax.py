"""Exercise `softmax`: a numerically stable softmax in NumPy, with input checks."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from ..core.assertions import CheckFailed, assert_close, assert_shape, expect_value_error
from ..core.diagnose import grid, matches, softmax_unchecked
from ..core.exercise import Exercise
from ..core.strategies import (
    Logits,
    allowed_somewhere,
    grid_array,
    logits_and_axis,
)

EX = Exercise("softmax", functions=("softmax",), framework="numpy", track="core", points=15,
              order=1,
              title="`softmax(logits, axis=-1)`: stable, with input checks")


# -- reference ----------------------------------------------------------------------------------
@EX.reference
def softmax(logits, axis=-1):
    """torch.softmax behind the exercise's input checks; NumPy in, NumPy out (or torch)."""
    if isinstance(logits, torch.Tensor):
        if torch.isneginf(logits).all(dim=axis).any():
            raise ValueError("every slice needs at least one entry above -inf")
        return torch.softmax(logits, dim=axis)
    array = np.asarray(logits)
    if array.dtype.kind not in "biuf":
        raise ValueError(f"the logits must be real numbers, not {array.dtype}")
    result_dtype = np.result_type(array.dtype, np.float32)
    converted = torch.from_numpy(array.astype(result_dtype))
    if array.dtype.kind in "iu" and array.size:
        back = converted.numpy().astype(object).ravel()
        if not all(int(f) == i for f, i in zip(back, array.ravel().tolist())):
            raise ValueError(f"some integer logit is not exact in {result_dtype}")
    if torch.isnan(converted).any() or torch.isposinf(converted).any():
        raise ValueError("logits must be finite, or -inf for a masked entry")
    if torch.isneginf(converted).all(dim=axis).any():
        raise ValueError("every slice needs at least one entry above -inf")
    if converted.numel() == 0:
        return converted.numpy().copy()
    return torch.softmax(converted, dim=axis).numpy()


# -- strategies ---------------------------------------------------------------------------------
@st.composite
def masked_logits(draw) -> Logits:
    """Logits with some -inf entries, never a whole slice of them."""
    x, axis = draw(logits_and_axis(dtypes=(np.float64,)))
    moved_shape = np.moveaxis(x, axis, -1).shape
    blocked = np.moveaxis(allowed_somewhere(draw, moved_shape), -1, axis)
    return Logits(np.where(blocked, -np.inf, x), axis)


def torch_softmax(logits: np.ndarray, axis: int) -> np.ndarray:
    return torch.softmax(torch.from_numpy(logits), dim=axis).numpy()


# Logits none of whose probabilities is a float32 number (each is 2e-8 to 5e-8 relative from
# the nearest one): a float64 result that went through float32 anywhere (the input, the exp,
# the division) is off by far more than float64's rounding here, whatever the drawn examples.
FLOAT32_VISIBLE = Logits(np.array([[0.1, 0.7, -0.3], [1.9, 1.3, 0.2]]), -1)


# -- checks -------------------------------------------------------------------------------------
@EX.check(points=2, prop="Every slice along `axis` sums to 1.")
@given(case=logits_and_axis())
def test_slices_sum_to_one(ctx, case):
    p = assert_shape(ctx.student.softmax(case.logits, axis=case.axis), case.logits.shape)
    sums = p.astype(np.float64).sum(axis=case.axis)
    assert_close(sums, np.ones_like(sums), dtype=case.logits.dtype, what="the slice sums")


@EX.check(points=1, prop="Every probability is non-negative and at most 1.")
@given(case=logits_and_axis())
def test_weights_in_unit_interval(ctx, case):
    p = assert_shape(ctx.student.softmax(case.logits, axis=case.axis), case.logits.shape)
    if not ((p >= 0) & (p <= 1)).all():
        raise CheckFailed("some probabilities are negative or above 1", got=p)


@EX.check(points=3, prop="The result matches torch.softmax along `axis` (float32 and float64).")
@given(case=logits_and_axis())
def test_matches_torch_softmax(ctx, case):
    # float64 to its rounding (assertions.ROUNDING), then on logits where float32 always shows
    for logits, axis in (case, FLOAT32_VISIBLE):
        ctx.show(logits=logits, axis=axis, drawn=logits is case.logits)
        got = ctx.student.softmax(logits, axis=axis)
        assert_close(got, torch_softmax(logits, axis), dtype=logits.dtype, rounding=True)


@EX.check(points=1, prop="Adding the same constant to a whole slice leaves the result unchanged.")
@given(case=logits_and_axis(dtypes=(np.float64,)), shift=st.floats(-50, 50))
def test_invariant_to_adding_a_constant(ctx, case, shift):
    base = ctx.student.softmax(case.logits, axis=case.axis)
    moved = ctx.student.softmax(case.logits + shift, axis=case.axis)
    assert_close(moved, base, what="softmax(logits + c)")


@EX.check(points=1, prop="Entries that are -inf get exactly zero probability.")
@given(case=masked_logits())
def test_exact_zeros_at_neg_inf(ctx, case):
    p = assert_shape(ctx.student.softmax(case.logits, axis=case.axis), case.logits.shape)
    blocked = np.isneginf(case.logits)
    if (p[blocked] != 0).any():
        raise CheckFailed("a -inf entry got a non-zero probability", got=p)
    # The others get what they get when the -inf entries are finite but far below the rest
    # (exp underflows to exactly 0 there): compared with the code's own answer, so this fails
    # for the -inf entries' sake only, never for precision the other checks judge.
    far_below = np.where(blocked, np.min(case.logits, where=~blocked, initial=0.0) - 1000.0,
                         case.logits)
    same = ctx.student.softmax(far_below, axis=case.axis)
    assert_close(p, same, what="the result beside the -inf entries (against the same logits "
                               "with each -inf replaced by a logit 1000 below the others)")


@EX.check(points=1, prop="Huge logits do not overflow: logits moved up by 1000 or 10000, or down "
                        "by 1000, give what the same logits give unmoved.")
@given(case=logits_and_axis(dtypes=(np.float64,)), offset=st.sampled_from([1e3, -1e3, 1e4]))
def test_stable_for_huge_logits(ctx, case, offset):
    ctx.show(logits=np.array([1000.0, 1000.0]), axis=-1)
    assert_close(ctx.student.softmax(np.array([1000.0, 1000.0])), [0.5, 0.5])
    ctx.show(logits=case.logits + offset, axis=case.axis, drawn=True)
    got = ctx.student.softmax(case.logits + offset, axis=case.axis)
    assert_close(got, torch_softmax(case.logits, case.axis))


@EX.check(points=1, prop="Slices of very different magnitude are each normalised on their own: "
                        "slices 1000 apart give what each slice gives alone.")
@given(case=logits_and_axis(dtypes=(np.float64,)))
def test_stable_for_slices_of_different_magnitude(ctx, case):
    first = np.array([[1000.0, 1000.0], [0.0, 0.0]])
    ctx.show(logits=first, axis=-1)
    assert_close(ctx.student.softmax(first, axis=-1), np.full((2, 2), 0.5))
    # Consecutive slices along `axis` sit 1000 apart: -1000, 0, 1000, -1000, ...
    slices = np.moveaxis(case.logits, case.axis, -1).shape[:-1]
    offsets = 1000.0 * (np.arange(int(np.prod(slices))) % 3 - 1).reshape(*slices, 1)
    logits = case.logits + np.moveaxis(offsets, -1, case.axis)
    ctx.show(logits=logits, axis=case.axis, drawn=True)
    got = ctx.student.softmax(logits, axis=case.axis)
    assert_close(got, torch_softmax(case.logits, case.axis))


@EX.check(points=1, prop="float32 stays float32, float64 stays float64, integers give float64.")
def test_result_dtype(ctx):
    for logits in (np.array([1.0, 2.0], np.float32), np.array([1.0, 2.0]), np.array([1, 2])):
        ctx.show(logits=logits)
        got = ctx.student.softmax(logits)
        expected = np.result_type(logits.dtype, np.float32)
        if got.dtype != expected:
            raise CheckFailed(f"the result has dtype {got.dtype}, expected {expected}")
    ctx.show(logits=[1, 2, 3])
    assert_close(ctx.student.softmax([1, 2, 3]), torch_softmax(np.array([1.0, 2.0, 3.0]), -1))


@EX.check(points=1, prop="NaN or +inf logits raise ValueError.")
def test_rejects_nan_and_posinf(ctx):
    for logits in (np.array([0.0, np.nan]), np.array([[1.0, np.inf], [0.0, 0.0]])):
        ctx.show(logits=logits)
        expect_value_error(lambda x=logits: ctx.student.softmax(x), f"logits {logits.tolist()}")


@EX.check(points=1, prop="A slice with no entry above -inf (or none at all) raises ValueError.")
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


@EX.check(points=1, prop="Non-real dtypes and inexact integers raise ValueError.")
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


EX.judge_input("softmax")


### BEGIN HIDDEN CHECKS
def softmax_structures(rng):
    """The shapes and axes the visible checks are built on, whatever the course secret, with
    logits from ``rng``: one to three axes, the first, a middle and the last one (counted from
    either end), float32 and float64."""
    return [{"case": Logits(grid_array(rng, dtype, shape, -10, 10), axis)}
            for dtype, shape, axis in ((np.float32, (4,), -1), (np.float64, (3, 4), 1),
                                       (np.float64, (2, 3, 4), 0), (np.float32, (4, 2, 3), -2))]


@EX.check(points=1, hidden=True, cases=softmax_structures,
          prop="softmax agrees with the answer key.")
@given(case=logits_and_axis())
def test_softmax_matches_answer_key(ctx, case):
    assert_close(ctx.student.softmax(*case), ctx.key.softmax(*case), dtype=case.logits.dtype,
                 rounding=True)
### END HIDDEN CHECKS


# -- misconceptions -----------------------------------------------------------------------------
EX.misconception(
    "softmax-overflow",
    mistake="exponentiates the logits directly, so large logits overflow to inf and give NaN",
    hint="subtract each slice's maximum before np.exp; the result is unchanged and exp() never "
         "sees a number above 0.",
)
EX.misconception(
    "softmax-wrong-axis",
    mistake="normalises along a fixed or different axis instead of `axis`",
    hint="take the max and the sum along the `axis` argument, with keepdims=True, so every "
         "slice along that axis is normalised on its own.",
)
EX.misconception(
    "softmax-global-shift",
    mistake="subtracts the maximum of the whole array (np.max(x) with no axis), so a slice far "
            "below it underflows to 0 / 0 = NaN",
    hint="subtract each slice's own maximum, np.max(x, axis=axis, keepdims=True): with one "
         "maximum for the whole array, softmax([[1000, 1000], [0, 0]]) turns the second row into "
         "exp(-1000) / exp(-1000) = 0 / 0.",
)
EX.misconception(
    "softmax-shift-wrong-axis",
    mistake="takes the maximum along a fixed axis while summing along `axis`",
    hint="take the maximum along the same `axis` as the sum: the shift must be one constant per "
         "slice, and a maximum taken along another axis changes from entry to entry within it.",
)
EX.misconception(
    "fully-masked-row",
    mistake="returns NaN, uniform weights or the unmasked weights for a row with no allowed entry",
    hint="a row whose entries are all blocked (all -inf, or a large negative number added to "
         "every score) has no valid distribution: detect it before the softmax and raise "
         "ValueError instead of returning NaN, even weights, or the weights the row would have "
         "unmasked.",
)


def naive_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """exp(x) / sum(exp(x)) without the shift, in torch: overflows to NaN for large logits."""
    e = torch.from_numpy(np.asarray(x, dtype=np.float64)).exp()
    return (e / e.sum(dim=axis, keepdim=True)).numpy()


def shifted_softmax(x: np.ndarray, axis: int, shift_axis: int | None) -> np.ndarray:
    """Normalised along ``axis`` after subtracting the maximum along another ``shift_axis``
    (None: the global maximum), in torch."""
    if shift_axis is not None and shift_axis % x.ndim == axis % x.ndim:
        raise ValueError("a mistaken version needs a mistake")
    t = torch.from_numpy(np.asarray(x, dtype=np.float64))
    top = t.max() if shift_axis is None else t.amax(dim=shift_axis, keepdim=True)
    e = (t - top).exp()
    return (e / e.sum(dim=axis, keepdim=True)).numpy()


def fully_masked_versions(scores: np.ndarray) -> list[np.ndarray]:
    """The two usual results for an all -inf row: NaN (no check) or uniform (-1e9 fill)."""
    return [softmax_unchecked(scores),
            softmax_unchecked(np.where(np.isneginf(scores), -1e9, scores))]


@EX.probe("softmax-overflow",
          explains=("test_stable_for_huge_logits", "test_stable_for_slices_of_different_magnitude"),
          mistaken={"softmax": lambda logits, axis=-1: [naive_softmax(np.asarray(logits), axis)]})
def probe_overflow(student) -> bool:
    logits = np.array([[1000.0, 999.0], [-1000.0, -1001.0]])
    return matches(student.softmax(logits, axis=-1), naive_softmax(logits, -1))


def along_other_axes(logits, axis=-1):
    """The softmax along each axis but ``axis``, and over the whole array."""
    x = np.asarray(logits, dtype=np.float64)
    return [softmax_unchecked(x, a) for a in (*range(x.ndim), None)
            if a is None or a != axis % x.ndim]


def shifted_along_other_axes(logits, axis=-1):
    """Normalised along ``axis`` after subtracting the maximum along each other axis."""
    x = np.asarray(logits, dtype=np.float64)
    return [shifted_softmax(x, axis, other) for other in range(x.ndim) if other != axis % x.ndim]


@EX.probe("softmax-wrong-axis",
          explains=("test_slices_sum_to_one", "test_matches_torch_softmax",
                    "test_stable_for_huge_logits", "test_stable_for_slices_of_different_magnitude"),
          mistaken={"softmax": along_other_axes})
def probe_wrong_axis(student) -> bool:
    logits = 3.0 * grid(2, 3, 4)
    for axis in (0, 1, -1):
        got = student.softmax(logits, axis=axis)
        others = [a for a in (0, 1, 2, None) if a != axis % 3]
        if any(matches(got, softmax_unchecked(logits, a)) for a in others):
            return True
    return False


@EX.probe("softmax-global-shift", explains=("test_stable_for_slices_of_different_magnitude",),
          mistaken={"softmax": lambda logits, axis=-1: [
              shifted_softmax(np.asarray(logits), axis, None)]})
def probe_global_shift(student) -> bool:
    # The second row sits 800 below the first: one global shift underflows it to 0 / 0.
    logits = np.array([[800.0, 799.0, 798.5], [0.5, -0.5, 0.0]])
    return matches(student.softmax(logits, axis=-1), shifted_softmax(logits, -1, None))


@EX.probe("softmax-shift-wrong-axis",
          explains=("test_matches_torch_softmax", "test_stable_for_slices_of_different_magnitude"),
          mistaken={"softmax": shifted_along_other_axes})
def probe_shift_wrong_axis(student) -> bool:
    logits = 3.0 * grid(2, 3, 4)
    for axis in (0, 1, 2):
        got = student.softmax(logits, axis=axis)
        if any(matches(got, shifted_softmax(logits, axis, other))
               for other in (0, 1, 2) if other != axis):
            return True
    return False


def mistaken_fully_masked(logits, axis=-1):
    """NaN (no check) or uniform (-1e9 fill) for an all -inf slice along ``axis``."""
    x = np.asarray(logits, dtype=np.float64)
    return [softmax_unchecked(x, axis), softmax_unchecked(np.where(np.isneginf(x), -1e9, x), axis)]


@EX.probe("fully-masked-row", explains=("test_rejects_fully_masked_slice",),
          mistaken={"softmax": mistaken_fully_masked})
def probe_fully_masked(student) -> bool:
    logits = np.array([[0.0, 1.0, 2.0], [-np.inf, -np.inf, -np.inf]])
    got = student.softmax(logits, axis=-1)
    return any(matches(got, wrong) for wrong in fully_masked_versions(logits))
