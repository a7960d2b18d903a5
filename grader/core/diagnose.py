"""Naming the misunderstanding behind a failure, from the submission's behaviour alone.

Each misconception is declared by an exercise module (``EX.misconception``) and probed by one or
more (``EX.probe``). A probe sends a fixed input through the same ``Student`` proxy the checks
use and compares the answer with a *mistaken version*: a few lines of NumPy that make exactly
that mistake. Every probe input is chosen so that the correct answer and the mistaken one are
far apart (``tests/test_diagnose.py`` keeps it so), which is why a correct submission is never
named. The source text is never read. A probe the submission cannot answer (it raises, returns
a wrong shape, is a stub) names nothing; a worker that dies ends the probing.

This module holds what probes share: the comparison and the mistaken versions that several
exercises reuse.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..sandbox.isolation import StudentError, WorkerLost
from .exercise import Exercise, Misconception
from .student import NotImplementedYet


@cache
def catalog() -> dict[str, Misconception]:
    """Every misconception any exercise declares, by id."""
    from .course import EXERCISES_BY_NAME

    found: dict[str, Misconception] = {}
    for exercise in EXERCISES_BY_NAME().values():
        found.update(exercise.misconceptions)
    return found


def exercises_naming(misconception_id: str) -> list[str]:
    """The exercises with a probe for ``misconception_id``."""
    from .course import EXERCISES_BY_NAME

    return [e.name for e in EXERCISES_BY_NAME().values()
            if any(m == misconception_id for m, _ in e.probes)]


def feedback_line(misconception_id: str) -> str:
    """The sentence a failing check carries when the mistake is diagnosed."""
    return f"Likely mistake ({misconception_id}): {catalog()[misconception_id].hint}"


def diagnose(exercise: Exercise, student: Any) -> list[str]:
    """The ids of the misconceptions ``student``'s behaviour shows, sorted."""
    found: set[str] = set()
    for misconception_id, probe in exercise.probes:
        try:
            if probe(student):
                found.add(misconception_id)
        except (StudentError, NotImplementedYet):
            continue  # the submission could not answer this probe: nothing to name
        except WorkerLost:
            break  # the worker is gone; the checks have already said what went wrong
        except Exception:  # an answer too malformed to compare (not a tuple, not a dict)
            continue
    return sorted(found)


# -- comparing an answer with the mistaken version --------------------------------------------
RTOL, ATOL = 1e-5, 1e-8  # loose enough for float32 work, far tighter than any probe's gap


def matches(got: Any, mistaken: Any) -> bool:
    """The submission's answer is the mistaken version's, NaNs in the same places included."""
    got, mistaken = np.asarray(got), np.asarray(mistaken)
    if got.shape != mistaken.shape or got.dtype.kind not in "biuf":
        return False
    if mistaken.dtype == np.bool_:
        return bool(np.array_equal(got, mistaken))
    return bool(np.allclose(got.astype(np.float64), mistaken, rtol=RTOL, atol=ATOL,
                            equal_nan=True))


def mistaken(got: Any, correct: Any, wrong: Any) -> bool:
    """The answer is the mistaken version's and not the correct one."""
    return not matches(got, correct) and matches(got, wrong)


# -- mistaken versions several exercises share -------------------------------------------------
def grid(*shape: int) -> np.ndarray:
    """Fixed, distinct, unremarkable numbers: no ties, no symmetry a mistake could hide in."""
    return np.cos(1.0 + 0.7 * np.arange(int(np.prod(shape)))).reshape(shape)


# The mistaken versions of the NumPy exercises are written with torch: the handout ships them,
# and copied into a NumPy exercise they break its rule instead of being an answer.
def softmax_unchecked(x: np.ndarray, axis: Any = -1) -> np.ndarray:
    """torch's softmax with no input checks: an all -inf slice comes out NaN. ``axis=None``
    normalises over the whole array (a mistake some make)."""
    t = torch.from_numpy(np.asarray(x, dtype=np.float64))
    if axis is None:
        return torch.softmax(t.flatten(), 0).reshape(t.shape).numpy()
    return torch.softmax(t, dim=axis).numpy()


def attention_with(q, k, v, mask=None, *, when="before", polarity=True, fill=-np.inf,
                   additive=None, scale=None):
    """Attention with one mistake switched on: the mask after the softmax, an inverted mask,
    another fill value, a mask added to the scores (``additive``: the large negative number
    added where blocked) or another ``scale`` than 1/sqrt(d_k). In torch, its output from
    F.scaled_dot_product_attention wherever the mistake allows: neither the NumPy `attention`
    nor `mha` (no library attention) can take it as an answer."""
    tq, tk, tv = (torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    scale = tq.shape[-1] ** -0.5 if scale is None else scale
    scores = tq @ tk.transpose(-1, -2) * scale
    bias = torch.zeros_like(scores)  # what turns the scores into the mistaken ones
    blocked = None if mask is None else torch.from_numpy(mask if polarity else ~mask)
    if blocked is not None and additive is not None:
        bias = bias + blocked * additive
    elif blocked is not None and when == "before":
        bias = torch.where(blocked, fill - scores, bias)  # blocked scores become `fill`
    weights = torch.softmax(scores + bias, dim=-1)
    if blocked is not None and when == "after":
        weights = weights.masked_fill(blocked, 0.0)
        return (weights @ tv).numpy(), weights.numpy()
    output = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=bias, scale=scale)
    # torch's attention gives a row with no allowed key zeros; the unchecked mistake gives NaN
    output = output.masked_fill(weights.isnan().any(-1, keepdim=True), float("nan"))
    return output.numpy(), weights.numpy()


MASK3 = np.array([[False, True, False], [False, False, True], [True, False, False]])
FULLY_MASKED2 = np.array([[False, True], [True, True]])
# What a row with no allowed key gives without the check: NaN (-inf fill), uniform weights (a
# large finite fill), or the row's unmasked weights (a large negative number added to every
# score of the row, which the softmax's shift cancels).
FULLY_MASKED_MISTAKES = ({"fill": -np.inf}, {"fill": -1e9}, {"additive": -1e9})
