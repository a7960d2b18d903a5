"""Bonus exercise `flash`: attention computed block by block of keys with an online softmax,
as in FlashAttention, in NumPy.

Compared with F.scaled_dot_product_attention (mask inverted) at the input dtype's tolerance
(float64: rtol 1e-7, atol 1e-9; float32: rtol 1e-4, atol 1e-5), for every block size from 1
to past the number of keys. The memory check is the kernel's: one call at T = 2048 runs in a
fresh worker, and the grading process reads the worker's peak memory (``VmHWM``) against what
it held before the file was loaded, so whatever the file allocates counts (at import, kept
between calls, on an mmap buffer), and nothing in the worker can report a smaller figure.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ..core import replay
from ..core.assertions import CheckFailed, assert_close, assert_shape, expect_value_error
from ..core.diagnose import grid, mistaken
from ..core.exercise import Exercise, positive_int
from ..core.strategies import (
    FLOAT_DTYPES,
    Seeded,
    allowed_somewhere,
    floats_array,
    grid_array,
    telling_mask,
)
from ..sandbox.operation_helpers import plain

EX = Exercise("flash", functions=("flash_attention",), framework="numpy", track="bonus",
              points=10, order=12,
              title="`flash_attention(q, k, v, mask=None, block_size=64)`: tiled attention with an "
                    "online softmax, in NumPy, in far less memory than one (T, T) array")

# The memory check: T queries and keys of width D, blocks of BLOCK keys. One (T, T) float64
# score matrix is 32 MiB; the limit is half of it, so a float32 score matrix fails too. A
# block's scores are (T, BLOCK), 512 KiB: the limit leaves room for several of them and for a
# copy or two of the (T, T) bool mask, while any version that builds the score matrix, or any
# other (T, T) float array, fails.
MEMORY_T, MEMORY_D, MEMORY_BLOCK = 2048, 16, 32
FULL_SCORES = MEMORY_T * MEMORY_T * 8
MEMORY_LIMIT = FULL_SCORES // 2
MIB = 1 << 20
# The kernel counts everything the worker holds beyond its start, so the kit's own share is
# taken off: q, k and v as they arrive and as arrays, the output and its reply, the file's
# module and the pages of NumPy's code first touched (3.3 MiB for a flash_attention that only
# returns zeros; the key's takes 6.3 MiB in all, one that builds the score matrix 69 MiB), and
# the causal mask, built before the call.
KIT_SHARE = 4 * MIB
MASK_BYTES = MEMORY_T * MEMORY_T
# The kernel's count of the same call moves by up to a few hundred KiB from run to run (97.01
# to 97.26 MiB for one file in five runs), and feedback must not: a figure is told rounded
# down to a multiple of this.
SHOWN_STEP = 8 * MIB


def shown_mib(used: int) -> int:
    """``used`` bytes as the feedback tells them: MiB, rounded down to a multiple of 8."""
    return used // SHOWN_STEP * SHOWN_STEP // MIB


# -- reference ----------------------------------------------------------------------------------
@EX.reference
def flash_attention(q, k, v, mask=None, block_size=64):
    """F.scaled_dot_product_attention (its bool mask means *allowed*) with the exercise's
    checks; NumPy in, NumPy out. It never blocks: blocking changes only the rounding."""
    positive_int(block_size, "block_size", 1)
    tq, tk, tv = (torch.as_tensor(np.asarray(a)) for a in (q, k, v))
    dtype = torch.promote_types(torch.promote_types(tq.dtype, tk.dtype),
                                torch.promote_types(tv.dtype, torch.float32))
    if tq.shape[-1] != tk.shape[-1]:
        raise ValueError(f"q width {tq.shape[-1]} differs from k width {tk.shape[-1]}")
    if tk.shape[-2] != tv.shape[-2]:
        raise ValueError(f"k has {tk.shape[-2]} positions but v has {tv.shape[-2]}")
    blocked = torch.zeros(1, 1, dtype=torch.bool) if mask is None else torch.as_tensor(
        np.asarray(mask))
    if blocked.dtype != torch.bool:
        raise ValueError(f"mask must be boolean (True = blocked), got {blocked.dtype}")
    batch = torch.broadcast_shapes(tq.shape[:-2], tk.shape[:-2], tv.shape[:-2],
                                   blocked.shape[:-2])
    allowed = ~blocked.broadcast_to((*batch, tq.shape[-2], tk.shape[-2]))
    if tk.shape[-2] == 0 or not allowed.any(dim=-1).all():
        raise ValueError("some query has no allowed key (its mask row is all True)")
    tq, tk, tv = (t.to(dtype).broadcast_to((*batch, *t.shape[-2:])) for t in (tq, tk, tv))
    return F.scaled_dot_product_attention(tq, tk, tv, attn_mask=allowed).numpy()


# -- worker operations ----------------------------------------------------------------------------
@EX.operation(measured=True)
def flash_peak(module, q, k, v, causal, block_size):
    """One call of the student's ``flash_attention``, in a fresh worker whose peak memory the
    grading process reads (``Student``): ``{"output"}``. The causal mask is built before the
    call, like q, k and v, and counts in the peak as they do."""
    mask = np.arange(q.shape[-2])[:, None] < np.arange(k.shape[-2]) if causal else None
    out = module.flash_attention(q, k, v, mask=mask, block_size=block_size)
    return {"output": plain(out, "what flash_attention returned")}


# -- strategies ---------------------------------------------------------------------------------
class Flash(NamedTuple):
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    mask: np.ndarray | None
    block_size: int


@st.composite
def flash_case(draw, dtypes=FLOAT_DTYPES, blocked_key=False, blocked_first_block=False,
               max_tk=10) -> Flash:
    """q (..., Tq, d_k), k (..., Tk, d_k), v (..., Tk, d_v) with up to two batch axes, maybe a
    mask that leaves every query a key ((..., Tq, Tk) or (Tq, Tk)), a block size 1..Tk + 2.

    ``blocked_key``: the mask blocks one key (drawn) for every query. ``blocked_first_block``:
    at least two blocks, and the mask blocks the whole first block for some queries (query 0
    among them), so that their running max is still -inf after it.
    """
    dtype = draw(st.sampled_from(dtypes))
    batch = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=2))
    tq, d_k, d_v = draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    if blocked_first_block:
        block_size = draw(st.integers(1, 3))
        tk = block_size * draw(st.integers(2, 3)) + draw(st.integers(0, block_size - 1))
    else:
        tk = draw(st.integers(2 if blocked_key else 1, max_tk))
        block_size = draw(st.integers(1, tk + 2))
    q = draw(floats_array(dtype, (*batch, tq, d_k), -3, 3))
    k = draw(floats_array(dtype, (*batch, tk, d_k), -3, 3))
    v = draw(floats_array(dtype, (*batch, tk, d_v), -3, 3))
    mask_batch = batch if draw(st.booleans()) else ()
    mask = None
    if blocked_key:
        key = draw(st.integers(0, tk - 1))
        rest = allowed_somewhere(draw, (*mask_batch, tq, tk - 1))
        mask = np.insert(rest, key, True, axis=-1)
    elif blocked_first_block:
        rest = allowed_somewhere(draw, (*mask_batch, tq, tk - block_size))
        first = allowed_somewhere(draw, (*mask_batch, tq, block_size))
        rows = np.array([True] + [draw(st.booleans()) for _ in range(tq - 1)])
        first[..., rows, :] = True
        mask = np.concatenate([first, rest], axis=-1)
    elif draw(st.booleans()):
        mask = allowed_somewhere(draw, (*mask_batch, tq, tk))
    return Flash(q, k, v, mask, block_size)


# -- checks -------------------------------------------------------------------------------------
def torch_sdpa(case: Flash) -> np.ndarray:
    """The output by F.scaled_dot_product_attention in float64 (its bool mask means allowed)."""
    q, k, v = (torch.from_numpy(a.astype(np.float64)) for a in case[:3])
    allowed = None if case.mask is None else ~torch.from_numpy(case.mask)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed).numpy()


def student_flash(ctx, case: Flash, block_size: int | None = None,
                  why_nan: str = "") -> np.ndarray:
    """The student's output, of the right shape and finite (every query has an allowed key)."""
    out = ctx.student.flash_attention(case.q, case.k, case.v, mask=case.mask,
                                      block_size=case.block_size if block_size is None
                                      else block_size)
    batch = np.broadcast_shapes(case.q.shape[:-2], case.k.shape[:-2],
                                () if case.mask is None else case.mask.shape[:-2])
    out = assert_shape(out, (*batch, case.q.shape[-2], case.v.shape[-1]), "the output")
    if out.dtype.kind == "f" and not np.isfinite(out).all():
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(out))[0])
        raise CheckFailed(f"the output has {out[index]} at index {index}{why_nan}", got=out)
    return out


@EX.check(points=2, prop="The output matches F.scaled_dot_product_attention (mask inverted) "
          "for every block size from 1 to past the number of keys.")
@given(case=flash_case())
def test_matches_torch_sdpa_for_every_block_size(ctx, case):
    assert_close(student_flash(ctx, case), torch_sdpa(case), dtype=case.q.dtype,
                 what="the output")


@EX.check(points=1, prop="Two block sizes give the same output on the same input.")
@given(case=flash_case(), other_block_size=st.integers(1, 12))
def test_output_does_not_depend_on_block_size(ctx, case, other_block_size):
    first = student_flash(ctx, case)
    other = student_flash(ctx, case, block_size=other_block_size)
    assert_close(other, first, dtype=case.q.dtype,
                 what=f"the output with block_size {other_block_size} (against block_size "
                      f"{case.block_size})")


@EX.check(points=2, prop=f"At T = {MEMORY_T} (block_size {MEMORY_BLOCK}, no mask and a causal "
          f"mask) the output is right and the peak memory the call allocates stays under half "
          f"of one (T, T) float64 array ({MEMORY_LIMIT // MIB} MiB): no score matrix is built.")
def test_peak_memory_far_below_one_score_matrix(ctx):
    values = Seeded(MEMORY_T)
    q, k, v = (values.array(np.float64, (MEMORY_T, MEMORY_D)) for _ in range(3))
    for causal in (False, True):
        mask = np.triu(np.ones((MEMORY_T, MEMORY_T), dtype=bool), k=1) if causal else None
        ctx.show(q=q, k=k, v=v, mask=mask, block_size=MEMORY_BLOCK)  # T, d: their shapes
        run, peak = ctx.student.flash_peak(q, k, v, causal, MEMORY_BLOCK)
        expected = replay.kept(  # the same on every run: computed once, kept with the examples
            (test_peak_memory_far_below_one_score_matrix, "expected", causal),
            lambda: torch_sdpa(Flash(q, k, v, mask, MEMORY_BLOCK)))  # noqa: B023
        assert_close(run["output"], expected, what="the output")
        if peak is None:
            raise CheckFailed("the worker's memory could not be read on this machine")
        used = max(0, peak - KIT_SHARE - (MASK_BYTES if causal else 0))
        if used >= MEMORY_LIMIT:
            raise CheckFailed(
                f"the call allocated at least {shown_mib(used)} MiB at T = {MEMORY_T} "
                f"({'causal mask' if causal else 'no mask'}); one (T, T) float64 score matrix "
                f"is {FULL_SCORES // MIB} MiB, the limit {MEMORY_LIMIT // MIB} MiB: keep only "
                f"one block's scores, (Tq, block_size), at a time")


@EX.check(points=1, prop="A key blocked for every query has no influence: changing its key and "
          "value changes nothing.")
@given(case=flash_case(dtypes=(np.float64,), blocked_key=True))
def test_blocked_key_has_no_influence(ctx, case):
    key = int(np.flatnonzero(case.mask.reshape(-1, case.mask.shape[-1]).all(axis=0))[0])
    k, v = case.k.copy(), case.v.copy()
    k[..., key, :] = 4.0
    v[..., key, :] = 100.0
    before = student_flash(ctx, case)
    after = student_flash(ctx, case._replace(k=k, v=v))
    assert_close(after, before, what=f"the output once the blocked key {key} is changed")


@EX.check(points=1, prop="A first block whose keys are all blocked for a query adds nothing to "
          "it: no NaN, and the output matches F.scaled_dot_product_attention.")
@given(case=flash_case(blocked_first_block=True))
def test_fully_blocked_first_block_gives_no_nan(ctx, case):
    out = student_flash(ctx, case, why_nan=": while every key seen so far is blocked the "
                        "running max is -inf, and exp(-inf - (-inf)) is NaN")
    assert_close(out, torch_sdpa(case), dtype=case.q.dtype, what="the output")


@EX.check(points=1, prop="block_size 0, negative or not an integer raises ValueError.")
def test_rejects_bad_block_size(ctx):
    q = k = v = np.ones((3, 2))
    for block_size in (0, -2, 2.5):
        ctx.show(q=q, k=k, v=v, block_size=block_size)
        expect_value_error(
            lambda b=block_size: ctx.student.flash_attention(q, k, v, block_size=b),
            f"block_size = {block_size!r}")


@EX.check(points=1, prop="Mismatched q/k widths or k/v lengths, a mask that is not boolean and "
          "a query with no allowed key raise ValueError.")
def test_rejects_bad_shapes_masks_and_queries_with_no_key(ctx):
    square = np.zeros((2, 2))
    bad = {
        "q width 3 but k width 2": (np.ones((2, 3)), np.ones((4, 2)), np.ones((4, 2)), None),
        "k with 4 positions but v with 3": (np.ones((2, 2)), np.ones((4, 2)), np.ones((3, 2)),
                                            None),
        "a mask of dtype int64": (square, square, square, np.array([[0, 1], [0, 0]])),
        "mask [[False, True], [True, True]] (query 1 sees nothing)":
            (square, square, square, np.array([[False, True], [True, True]])),
    }
    for what, (q, k, v, mask) in bad.items():
        ctx.show(q=q, k=k, v=v, mask=mask, block_size=1)
        expect_value_error(
            lambda q=q, k=k, v=v, m=mask: ctx.student.flash_attention(q, k, v, m, block_size=1),
            what)


EX.judge_input("flash_attention", covers=("flash_attention", "flash_peak"))


### BEGIN HIDDEN CHECKS
def running_max_rises(q, k, mask, block_size) -> bool:
    """Whether, block after block of keys, some query's running max of its allowed scores
    rises after it was finite (what was summed before must then be rescaled)."""
    scores = np.where(mask, -np.inf, q @ np.swapaxes(k, -1, -2))  # (..., Tq, Tk)
    blocks = np.split(scores, range(block_size, scores.shape[-1], block_size), axis=-1)
    running = np.maximum.accumulate(np.stack([b.max(axis=-1) for b in blocks]), axis=0)
    return bool((np.isfinite(running[:-1]) & (running[1:] > running[:-1])).any())


def flash_structures(rng):
    """The inputs the visible checks are built on, whatever the course secret, with values
    from ``rng``: block sizes of 1, 2 (the last block shorter) and past the number of keys; no
    mask, one (Tq, Tk) mask for two batch axes, and a mask per batch entry that blocks the
    whole first block of keys for query 0, on scores whose running max rises in a later
    block; d_v != d_k; float32 and float64."""
    cases = []
    for dtype, batch, (tq, tk, dk, dv), block_size, mask_kind in (
        (np.float32, (), (1, 6, 2, 2), 1, None),
        (np.float64, (), (2, 3, 1, 3), 5, None),
        (np.float32, (2, 2), (4, 5, 3, 1), 2, "broadcast"),
        (np.float64, (2,), (3, 7, 2, 3), 2, "first block blocked"),
    ):
        while True:
            q, k, v = (grid_array(rng, dtype, (*batch, t, d)) for t, d in
                       ((tq, dk), (tk, dk), (tk, dv)))
            mask = None
            if mask_kind == "broadcast":
                mask = telling_mask(rng, (tq, tk))
            elif mask_kind is not None:
                first = rng.random((*batch, tq, block_size)) < 0.5
                first[..., 0, :] = True  # query 0 has no key in the first block
                mask = np.concatenate([first, telling_mask(rng, (*batch, tq, tk - block_size))],
                                      axis=-1)
            if mask_kind != "first block blocked" or running_max_rises(q, k, mask, block_size):
                break
        cases.append({"case": Flash(q, k, v, mask, block_size)})
    return cases


@EX.check(points=1, hidden=True, cases=flash_structures,
          prop="flash_attention agrees with the answer key.")
@given(case=flash_case())
def test_flash_matches_answer_key(ctx, case):
    assert_close(ctx.student.flash_attention(*case), ctx.key.flash_attention(*case),
                 dtype=case.q.dtype, what="the output")
### END HIDDEN CHECKS


# -- misconceptions -----------------------------------------------------------------------------
EX.misconception(
    "online-softmax-no-rescale",
    mistake="updates the running max but never rescales the running sum and output by "
            "exp(m_old - m_new), so the terms summed before the max grew stay too large",
    hint="when a block raises a query's running max from m_old to m_new, what you summed so "
         "far was shifted by m_old: multiply the running sum and the running output by "
         "exp(m_old - m_new) before adding the block's exp(score - m_new) terms.",
)


FORGETS = ("both", "output", "sum")


def no_rescale(q, k, v, mask=None, block_size=64) -> list[np.ndarray]:
    """The online softmax that forgets to rescale its running sum and output, its running
    output, or its running sum when the max grows (``FORGETS``), in torch (the handout ships
    it: copied into the NumPy exercise it breaks the rule, and it cannot be made right by a
    flag): the mistaken version of flash_attention. It refuses what the reference refuses,
    and a block all blocked for a query adds nothing to it."""
    flash_attention(q, k, v, mask, block_size)
    tq, tk, tv = (torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    blocked = torch.zeros(1, 1, dtype=torch.bool) if mask is None else torch.from_numpy(
        np.asarray(mask))
    batch = torch.broadcast_shapes(tq.shape[:-2], tk.shape[:-2], tv.shape[:-2],
                                   blocked.shape[:-2])
    tq, tk, tv = (t.expand(*batch, *t.shape[-2:]) for t in (tq, tk, tv))
    scores = (tq @ tk.transpose(-2, -1) / tq.shape[-1] ** 0.5).masked_fill(
        blocked.expand(*batch, tq.shape[-2], tk.shape[-2]), -torch.inf)
    row_max = torch.full((*batch, tq.shape[-2], 1), -torch.inf, dtype=torch.float64)
    sums = {f: torch.zeros((*batch, tq.shape[-2], 1), dtype=torch.float64) for f in FORGETS}
    accs = {f: torch.zeros((*batch, tq.shape[-2], tv.shape[-1]), dtype=torch.float64)
            for f in FORGETS}
    for start in range(0, tk.shape[-2], block_size):
        block = scores[..., start:start + block_size]
        new_max = torch.maximum(row_max, block.amax(dim=-1, keepdim=True))
        shift = torch.where(new_max.isneginf(), 0.0, new_max)
        weights = (block - shift).exp()
        kept = (row_max - shift).exp()
        added, summed = weights @ tv[..., start:start + block_size, :], weights.sum(-1, True)
        for f in FORGETS:
            sums[f] = sums[f] * (1.0 if f in ("sum", "both") else kept) + summed
            accs[f] = accs[f] * (1.0 if f in ("output", "both") else kept) + added
        row_max = new_max
    return [(accs[f] / sums[f]).numpy() for f in FORGETS]


def no_rescale_peak(q, k, v, causal, block_size):
    """The mistaken version of flash_peak: its reply for each way of forgetting the rescale
    (the causal mask built as the operation builds it)."""
    mask = np.arange(q.shape[-2])[:, None] < np.arange(k.shape[-2]) if causal else None
    return [{"output": output} for output in no_rescale(q, k, v, mask, block_size)]


# Scores grow with the key's index for every query, so the max grows at every block of 2.
PROBE_Q = 1.0 + 0.4 * grid(3, 2)
PROBE_K = np.arange(6.0)[:, None] * np.array([0.8, 0.6]) + 0.3 * grid(6, 2)
PROBE_V = 2.0 * grid(6, 2)


@EX.probe("online-softmax-no-rescale",
          explains=("test_matches_torch_sdpa_for_every_block_size",
                    "test_output_does_not_depend_on_block_size",
                    "test_peak_memory_far_below_one_score_matrix",
                    "test_fully_blocked_first_block_gives_no_nan"),
          mistaken={"flash_attention": no_rescale, "flash_peak": no_rescale_peak})
def probe_no_rescale(student) -> bool:
    got = student.flash_attention(PROBE_Q, PROBE_K, PROBE_V, block_size=2)
    correct = flash_attention(PROBE_Q, PROBE_K, PROBE_V)
    return any(mistaken(got, correct, wrong)
               for wrong in no_rescale(PROBE_Q, PROBE_K, PROBE_V, block_size=2))
