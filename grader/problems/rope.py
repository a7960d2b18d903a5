"""Bonus exercise `rope`: rotary position embeddings with RoFormer's interleaved pairs, in NumPy.

Checked against the formula computed by torch in float64, at the input's dtype tolerance, and by
its properties: norms kept, position 0 the identity, scores that depend on the offset only, and
a cached chunk that continues the full sequence. Float32 cases keep positions small (at most
16): a float32 angle of position times frequency is off by about position * 1e-7 radians.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ..core.assertions import CheckFailed, assert_close, assert_shape, expect_value_error
from ..core.diagnose import grid, mistaken
from ..core.exercise import Exercise
from ..core.strategies import FLOAT_DTYPES, Seeded, floats_array, grid_array, seeds

EX = Exercise("rope", functions=("rotary_embedding",), framework="numpy", track="bonus",
              points=10, order=11,
              title="`rotary_embedding(x, positions, base=10000.0)`: RoFormer's interleaved "
                    "pairs, in NumPy")


# -- reference ----------------------------------------------------------------------------------
@EX.reference
def torch_rope(x, positions, base=10000.0, *, halves=False, exponent=2):
    """x (..., T, d) with pair i of row t turned by positions[t] * base**(-exponent * i / d),
    by torch in float64. The defaults are RoFormer's rotation; ``halves=True`` pairs entry i
    with entry i + d/2 ("rotate half") and ``exponent=1`` slows the frequencies: two mistakes."""
    values = torch.from_numpy(np.asarray(x, dtype=np.float64))
    d = values.shape[-1]
    pair = torch.arange(d // 2, dtype=torch.float64)
    angles = torch.as_tensor(np.asarray(positions), dtype=torch.float64)[:, None] * (
        float(base) ** (-exponent * pair / d))  # (T, d/2)
    if halves:
        a, b = values[..., : d // 2], values[..., d // 2:]
    else:
        a, b = values[..., 0::2], values[..., 1::2]
    turned_a = a * torch.cos(angles) - b * torch.sin(angles)  # (..., T, d/2)
    turned_b = a * torch.sin(angles) + b * torch.cos(angles)
    if halves:
        return torch.cat((turned_a, turned_b), dim=-1).numpy()
    return torch.stack((turned_a, turned_b), dim=-1).flatten(-2).numpy()  # a0 b0 a1 b1 ...


@EX.reference
def rotary_embedding(x, positions, base=10000.0):
    """The exercise's input checks, then ``torch_rope`` in x's float dtype (float64 for
    integers)."""
    values, positions = np.asarray(x), np.asarray(positions)
    if (values.dtype.kind not in "iuf" or values.ndim < 2 or values.shape[-1] % 2
            or values.shape[-1] == 0):
        raise ValueError(f"x must be real numbers of shape (..., T, d), d even, got "
                         f"{values.dtype} of shape {values.shape}")
    if positions.dtype.kind not in "iu" or positions.shape != values.shape[-2:-1]:
        raise ValueError(f"positions must be {values.shape[-2]} integers, got {positions.dtype} "
                         f"of shape {positions.shape}")
    if isinstance(base, bool) or not isinstance(base, numbers.Real) or not math.isfinite(base) \
            or base <= 0:
        raise ValueError(f"the base must be finite and positive, not {base!r}")
    result_dtype = values.dtype if values.dtype.kind == "f" else np.dtype(np.float64)
    return torch_rope(values, positions, base).astype(result_dtype)


# -- strategies ---------------------------------------------------------------------------------
BASES = (10000.0, 100.0, 500000.0)  # the default, a small one (every pair turns fast), Llama 3's
LARGEST_POSITION = {np.float64: 64, np.float32: 16}


class Rope(NamedTuple):
    x: np.ndarray
    positions: np.ndarray
    base: float


@st.composite
def rope_case(draw, dtypes=FLOAT_DTYPES, zero_positions=False) -> Rope:
    """x (..., T, d) with up to two leading axes, T <= 4, d in 2, 4, 6; positions in
    -8..LARGEST_POSITION (all zero with ``zero_positions``)."""
    dtype = draw(st.sampled_from(dtypes))
    batch = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=2))
    t, d = draw(st.integers(1, 4)), 2 * draw(st.integers(1, 3))
    x = draw(floats_array(dtype, (*batch, t, d), -3, 3))
    if zero_positions:
        positions = np.zeros(t, np.int64)
    else:
        top = LARGEST_POSITION[dtype]
        positions = np.array(draw(st.lists(st.integers(-8, top), min_size=t, max_size=t)),
                             np.int64)
    return Rope(x, positions, draw(st.sampled_from(BASES)))


class Chunk(NamedTuple):
    x: np.ndarray  # the full sequence, (..., T, d)
    n_cached: int  # rows 0..n_cached - 1 are already in the cache


@st.composite
def chunk_case(draw) -> Chunk:
    t, d = draw(st.integers(2, 6)), 2 * draw(st.integers(1, 3))
    heads = draw(st.sampled_from([(), (2,)]))
    x = draw(floats_array(np.float64, (*heads, t, d), -3, 3))
    return Chunk(x, draw(st.integers(1, t - 1)))


class Offset(NamedTuple):
    q: np.ndarray  # (d,)
    k: np.ndarray  # (d,)
    m: int  # the query's position
    n: int  # the key's position
    shift: int


@st.composite
def offset_case(draw) -> Offset:
    d = 2 * draw(st.integers(1, 3))
    values = Seeded(draw(seeds))
    q, k = values.array(np.float64, (d,)), values.array(np.float64, (d,))
    m, n, shift = draw(st.integers(0, 16)), draw(st.integers(0, 16)), draw(st.integers(1, 16))
    return Offset(q, k, m, n, shift)


# -- checks -------------------------------------------------------------------------------------
def student_rope(ctx, x, positions, base=None) -> np.ndarray:
    """The student's result, of x's shape; ``base=None`` leaves the default to the student."""
    if base is None:
        got = ctx.student.rotary_embedding(x, positions)
    else:
        got = ctx.student.rotary_embedding(x, positions, base=base)
    got = assert_shape(got, np.shape(x), "the result")
    if got.dtype.kind != "f":
        raise CheckFailed(f"the result has dtype {got.dtype}, expected floats")
    return got


@EX.check(points=2, prop="The result matches the RoFormer rotation computed by torch (float32 "
       "and float64, at their tolerances).")
@given(case=rope_case())
def test_matches_torch_roformer(ctx, case):
    got = student_rope(ctx, *case)
    assert_close(got, torch_rope(*case), dtype=case.x.dtype, what="the rotated x")


@EX.check(points=1, prop="The norm of every row of x is unchanged: each pair is rotated, not "
       "stretched.")
@given(case=rope_case())
def test_preserves_norms(ctx, case):
    got = student_rope(ctx, *case).astype(np.float64)
    assert_close(np.linalg.norm(got, axis=-1), np.linalg.norm(case.x.astype(np.float64), axis=-1),
                 dtype=case.x.dtype, what="the row norms")


@EX.check(points=1, prop="At position 0 every row comes back unchanged.")
@given(case=rope_case(zero_positions=True))
def test_position_zero_is_identity(ctx, case):
    assert_close(student_rope(ctx, *case), case.x, dtype=case.x.dtype,
                 what="x rotated at positions 0")


@EX.check(points=1, prop="rope(q, m) . rope(k, n) depends only on m - n: shifting both "
       "positions, or moving the key to 0, leaves it unchanged.")
@given(case=offset_case())
def test_scores_depend_only_on_the_offset(ctx, case):
    q, k, m, n, shift = case
    pair = np.stack([q, k])  # row 0 the query, row 1 the key

    def score(positions):
        rotated = student_rope(ctx, pair, np.array(positions, np.int64))
        return rotated[0] @ rotated[1]  # a NumPy scalar

    at_mn = score([m, n])
    assert_close(score([m + shift, n + shift]), at_mn,
                 what=f"the score at positions ({m + shift}, {n + shift}) against ({m}, {n})")
    assert_close(score([m - n, 0]), at_mn,
                 what=f"the score at positions ({m - n}, 0) against ({m}, {n})")


@EX.check(points=1, prop="A chunk after n cached rows, at positions n..T-1, gets the last rows of "
       "the full sequence's result (the chunk does not restart at 0).")
@given(case=chunk_case())
def test_shifted_chunk_equals_slice_of_full_sequence(ctx, case):
    x, n_cached = case
    t = x.shape[-2]
    full = student_rope(ctx, x, np.arange(t))
    chunk = student_rope(ctx, x[..., n_cached:, :], np.arange(n_cached, t))
    assert_close(chunk, full[..., n_cached:, :],
                 what=f"the chunk at positions {n_cached}..{t - 1}")


@EX.check(points=1, prop="Known rotations: at position p, pair i of a row of d entries turns by "
       "p * base**(-2i/d) radians (base 10000 unless given).")
def test_known_rotations(ctx):
    one, two = math.cos(1.0), math.sin(1.0)
    cases = [  # x, positions, base (None: the default), expected
        ([[1.0, 0.0]], [1], None, [[one, two]]),
        ([[0.5, -2.0]], [0], None, [[0.5, -2.0]]),
        ([[1.0, 0.0, 1.0, 0.0]], [1], 100.0, [[one, two, math.cos(0.1), math.sin(0.1)]]),
        ([[0.0, 1.0, 0.0, 1.0]], [2], None,
         [[-math.sin(2.0), math.cos(2.0), -math.sin(0.02), math.cos(0.02)]]),
    ]
    for x, positions, base, expected in cases:
        x, positions = np.array(x), np.array(positions)
        shown = {"x": x, "positions": positions} | ({} if base is None else {"base": base})
        ctx.show(**shown)
        assert_close(student_rope(ctx, x, positions, base), expected,
                     what=f"the rotation of {x.tolist()} at position {positions[0]}"
                          f"{'' if base is None else f', base {base:g}'}")


@EX.check(points=1, prop="float32 stays float32, float64 stays float64, integer x gives float64 "
       "with the same values; positions may be any integer array-like.")
def test_result_dtype(ctx):
    x64, positions = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([0, 3], np.int32)
    ctx.show(x=x64, positions=positions)
    as_float64 = student_rope(ctx, x64, positions)
    for x in (x64.astype(np.float32), x64, x64.astype(np.int64)):
        ctx.show(x=x, positions=positions)
        got = student_rope(ctx, x, positions)
        expected = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
        if got.dtype != expected:
            raise CheckFailed(f"the result has dtype {got.dtype}, expected {expected}")
        assert_close(got, as_float64, dtype=x.dtype,
                     what=f"the result for {x.dtype} x against the same x in float64")
    ctx.show(x=x64, positions=[0, 3])
    assert_close(student_rope(ctx, x64, [0, 3]), as_float64,
                 what="the result for positions given as a list [0, 3]")


@EX.check(points=1, prop="An odd d, x with one axis or complex values, positions of the wrong "
       "shape, length or dtype (float, bool), and base <= 0 raise ValueError.")
def test_rejects_bad_inputs(ctx):
    x = np.ones((2, 4))
    cases = [  # what, x, positions, base
        ("x of shape (2, 3): d is odd", np.ones((2, 3)), np.array([0, 1]), 10000.0),
        ("x of shape (4,): no position axis", np.ones(4), np.array([0]), 10000.0),
        ("complex x", x.astype(complex), np.array([0, 1]), 10000.0),
        ("positions of shape (1, 2)", x, np.array([[0, 1]]), 10000.0),
        ("3 positions for T = 2", x, np.array([0, 1, 2]), 10000.0),
        ("float positions [0.0, 1.0]", x, np.array([0.0, 1.0]), 10000.0),
        ("bool positions [False, True]", x, np.array([False, True]), 10000.0),
        ("base 0.0", x, np.array([0, 1]), 0.0),
    ]
    for what, bad_x, positions, base in cases:
        ctx.show(x=bad_x, positions=positions, base=base)
        expect_value_error(
            lambda a=bad_x, p=positions, b=base: ctx.student.rotary_embedding(a, p, base=b), what)


EX.judge_input("rotary_embedding")


### BEGIN HIDDEN CHECKS
def rope_structures(rng):
    """The shapes the visible checks are built on, whatever the course secret, with x and the
    positions (distinct, negative ones among those allowed) from ``rng``: d = 2, 4 and 6, no
    leading axis to two, one position to four, every base, float32 and float64."""
    cases = []
    for dtype, batch, t, d, base in ((np.float32, (), 1, 6, BASES[0]),
                                     (np.float64, (2, 2), 2, 2, BASES[2]),
                                     (np.float32, (2,), 3, 4, BASES[1]),
                                     (np.float64, (2,), 4, 6, BASES[0])):
        x = grid_array(rng, dtype, (*batch, t, d))
        positions = rng.choice(np.arange(-8, LARGEST_POSITION[dtype] + 1), t, replace=False)
        cases.append({"case": Rope(x, positions.astype(np.int64), base)})
    return cases


@EX.check(points=1, hidden=True, cases=rope_structures,
          prop="rotary_embedding agrees with the answer key.")
@given(case=rope_case())
def test_rope_matches_answer_key(ctx, case):
    assert_close(student_rope(ctx, *case), ctx.key.rotary_embedding(*case), dtype=case.x.dtype)
### END HIDDEN CHECKS


# -- misconceptions -----------------------------------------------------------------------------
EX.misconception(
    "rope-half-split",
    mistake="pairs entry i with entry i + d/2 (the GPT-NeoX / Llama \"rotate half\" layout) "
            "instead of neighbouring entries",
    hint="this exercise follows the RoFormer paper: pair i is the neighbours (x[..., 2i], "
         "x[..., 2i + 1]), i.e. x[..., 0::2] against x[..., 1::2], not the first half of the "
         "features against the second half.",
)
EX.misconception(
    "rope-frequency",
    mistake="turns pair i by base**(-i/d) per position instead of base**(-2i/d)",
    hint="the exponent counts the pair's first feature, 2i: pair i turns base**(-2i/d) radians "
         "per position, i.e. base ** (-np.arange(0, d, 2) / d), not np.arange(d // 2) / d.",
)
EX.misconception(
    "rope-ignores-positions",
    mistake="turns row t by its row number t (0..T-1) whatever `positions` says",
    hint="use positions[t], not the row index t: a chunk of new tokens after a cache of n rows "
         "sits at positions n, n + 1, ..., so starting again at 0 gives it the angles of the "
         "sequence's first tokens.",
)

# Distinct features, 2 heads, T = 3, d = 6; positions unlike 0, 1, 2 so that the row number and
# the position never agree.
PROBE_X = 2.0 * grid(2, 3, 6)
PROBE_POSITIONS = np.array([7, 4, 9])


def probe_answer(student) -> np.ndarray:
    return student.rotary_embedding(PROBE_X, PROBE_POSITIONS)


def mistaken_rope(**mistake):
    """The mistaken version of rotary_embedding, for ``EX.probe(mistaken=...)``."""
    def version(x, positions, base=10000.0):
        if "positions" in mistake:  # the row number instead of the position
            positions = np.arange(len(np.asarray(positions)))
        options = {k: v for k, v in mistake.items() if k != "positions"}
        return [torch_rope(np.asarray(x), np.asarray(positions), base, **options)]
    return {"rotary_embedding": version}


@EX.probe("rope-half-split", explains=("test_matches_torch_roformer", "test_known_rotations"),
          mistaken=mistaken_rope(halves=True))
def probe_half_split(student) -> bool:
    return mistaken(probe_answer(student), torch_rope(PROBE_X, PROBE_POSITIONS),
                    torch_rope(PROBE_X, PROBE_POSITIONS, halves=True))


@EX.probe("rope-frequency", explains=("test_matches_torch_roformer", "test_known_rotations"),
          mistaken=mistaken_rope(exponent=1))
def probe_frequency(student) -> bool:
    return mistaken(probe_answer(student), torch_rope(PROBE_X, PROBE_POSITIONS),
                    torch_rope(PROBE_X, PROBE_POSITIONS, exponent=1))


@EX.probe("rope-ignores-positions",
          explains=("test_matches_torch_roformer", "test_position_zero_is_identity",
                    "test_shifted_chunk_equals_slice_of_full_sequence", "test_known_rotations"),
          mistaken=mistaken_rope(positions=None))
def probe_ignores_positions(student) -> bool:
    return mistaken(probe_answer(student), torch_rope(PROBE_X, PROBE_POSITIONS),
                    torch_rope(PROBE_X, np.arange(len(PROBE_POSITIONS))))
