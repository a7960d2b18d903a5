"""Naming the misunderstanding behind a failure, from the submission's behaviour alone.

Each misconception is declared by an exercise module (``EX.misconception``) and probed by one or
more (``EX.probe``). A probe sends a fixed input through the same ``Student`` proxy the checks
use and compares the answer with a *mistaken version*: a few lines of torch that make exactly
that mistake (``EX.probe(mistaken=...)``, for every function and operation it touches). Every
probe input is chosen so that the correct answer and the mistaken one are far apart
(``tests/test_diagnose.py`` keeps it so), which is why a correct submission is never named.
The source text is never read. A probe the submission cannot answer (it raises, returns a
wrong shape, is a stub) names nothing; a worker that dies ends the probing.

A mistake found is hinted under a failing check only where the check's own shown example
exhibits it (``earned``): the student's answer on one of its calls is the mistaken version's
and not the reference's.

This module holds what probes share: the comparisons and the mistaken versions that several
exercises reuse.
"""

from __future__ import annotations

import inspect
import types
from functools import cache
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..sandbox.errors import StudentError, WorkerLost
from .exercise import Exercise, Misconception
from .student import NotImplementedYet, Student


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


def diagnose(exercise: Exercise, student: Any,
             inputs: dict[str, tuple] | None = None) -> list[str]:
    """The ids of the misconceptions ``student``'s behaviour shows, sorted. ``inputs`` gets,
    for each one found, the first of the probe's calls on which the answer was the mistaken
    version's and not the reference's (``earned``)."""
    found: set[str] = set()
    listening = getattr(student, "__dict__", {}).get("_calls")
    for misconception_id, probe in exercise.probes:
        calls: list[tuple] = []
        if isinstance(student, Student):
            student._calls = calls
        try:
            if probe(student):
                found.add(misconception_id)
                shown = [c for c in calls if earned(exercise, misconception_id, [c]) == SHOWS]
                if inputs is not None and shown:
                    inputs[misconception_id] = shown[0]
        except (StudentError, NotImplementedYet):
            continue  # the submission could not answer this probe: nothing to name
        except WorkerLost:
            break  # the worker is gone; the checks have already said what went wrong
        except Exception:  # an answer too malformed to compare (not a tuple, not a dict)
            continue
        finally:
            if isinstance(student, Student):
                student._calls = listening
    return sorted(found)


# -- hints earned by their example -------------------------------------------------------------
SHOWS, CANNOT_SHOW, DOES_NOT_SHOW = "shows", "cannot show", "does not show"


def earned(exercise: Exercise, misconception_id: str, calls: list[tuple]) -> str | None:
    """Whether the example a check failed on (the student's ``calls`` during it) exhibits the
    mistake: SHOWS (on some call the student gave an answer of the mistaken version and not
    the reference's), CANNOT_SHOW (the student answered with values of the right shape, and
    on every call the mistake gives the reference's own answer: the example is too small to
    tell) or DOES_NOT_SHOW (the failure is something else: an exception, another shape,
    another value). A mistaken version that raises where the reference answers shows the
    mistake in a call that raised the same exception. None: the example made no call the
    mistaken version answers (it cannot exhibit the mistake either)."""
    versions = exercise.mistaken.get(misconception_id, {})
    covered = [c for c in calls if c[0] in versions]
    if not covered:
        return None
    verdict = CANNOT_SHOW
    for name, args, kwargs, reply in covered:
        try:
            correct: Any = answering(exercise, name)(*args, **kwargs)
        except Exception:  # the reference refuses these arguments (the contract's error)
            correct = None
        try:
            candidates = versions[name](*args, **kwargs)
        except Exception as error:  # the mistake raises here (a row it blocks entirely)
            if (isinstance(reply, StudentError) and correct is not None
                    and reply.type == type(error).__name__):
                return SHOWS
            verdict = DOES_NOT_SHOW
            continue
        if isinstance(reply, StudentError):
            verdict = DOES_NOT_SHOW
            continue
        try:
            parts = [_part(correct, c) for c in candidates]
            if any(_same(reply, c) and (part is None or not _same(reply, part))
                   for c, part in zip(candidates, parts)):
                return SHOWS
            if correct is None or not _shaped(reply, correct) or not all(
                    part is not None and _same(c, part) for c, part in zip(candidates, parts)):
                verdict = DOES_NOT_SHOW
        except Exception:  # a reply no comparison can read (nested past any limit): not this
            verdict = DOES_NOT_SHOW
    return verdict


def answering(exercise: Exercise, name: str) -> Any:
    """What answers ``name`` (a function or an operation of ``exercise``) rightly, here: its
    reference, the reference its judgement names (``EX.judge_input``), or the operation run on the
    references as the worker runs it on the student's module."""
    if name in exercise.references:
        return exercise.references[name]
    for judged in exercise.judged:
        if judged.call == name:
            return judged.reference
    return exercise._answers(name)


def operated(exercise: Exercise, operation: str, **objects: Any) -> Any:
    """Operation ``operation`` of ``exercise`` run as the answer key's is, on its references
    with ``objects`` (name -> a mistaken function or module class) in their place: the
    mistaken version of the operation, for ``EX.probe(mistaken=...)``."""
    function = exercise.operations[operation]

    def version(*args: Any, **kwargs: Any) -> Any:
        module = types.SimpleNamespace(**{**exercise.references, **objects})
        return function(module, *args, **kwargs)

    return version


def note_misconceptions(result: Any, found: list[str], *, exercise: Exercise,
                        hints: bool = True, evidence: dict[str, list[tuple]] | None = None,
                        probed: dict[str, tuple] | None = None) -> None:
    """Record the diagnosed mistakes on ``result`` (an ``engine.ExerciseResult``) and hint its
    failing checks (``hint_checks``)."""
    result.misconceptions = sorted(found)
    hint_checks(result.checks, found, exercise=exercise, hints=hints, evidence=evidence,
                probed=probed)


def hint_checks(checks: list[Any], found: list[str], *, exercise: Exercise, hints: bool = True,
                evidence: dict[str, list[tuple]] | None = None,
                probed: dict[str, tuple] | None = None) -> None:
    """A failing check of ``checks`` (``engine.CheckResult``) gets the hint of each mistake in
    ``found`` that its own shown example exhibits (``earned``; ``evidence``: check -> the
    calls of its example) and, for a visible check, that the probe says explains its failure
    (``Exercise.probe``), and no other: an exception, another shape or another value under it
    says nothing of the mistake, nor does an example that made no call the mistake answers.
    Where that example is too small to show the mistake, a check the probe names gets the hint
    with the probe's own input (``probed``) beside it."""
    for c in checks:
        if c.passed or not hints:
            continue
        lines = []
        for m in sorted(found):
            if not exercise.explains(m, c.name, hidden=c.hidden):
                continue
            shown = earned(exercise, m, (evidence or {}).get(c.name, []))
            named = c.name in exercise.explained.get(m, ())
            if shown == SHOWS:
                lines.append(feedback_line(m))
            elif shown == CANNOT_SHOW and named and m in (probed or {}):
                lines += [feedback_line(m), probe_input_line(exercise, (probed or {})[m])]
        if lines:
            c.feedback = "\n".join([c.feedback, *lines])


def _same(got: Any, answer: Any) -> bool:
    """``matches``, element by element for a tuple of arrays (output and weights), key by key
    for a dict (an operation's reply: the keys ``answer`` has), and equal for a string or
    None (what a module lacks, a gradient that never came)."""
    if isinstance(answer, dict):
        return isinstance(got, dict) and all(
            key in got and _same(got[key], value) for key, value in answer.items())
    if isinstance(answer, (tuple, list)):
        return (isinstance(got, (tuple, list)) and len(got) == len(answer)
                and all(_same(g, a) for g, a in zip(got, answer)))
    if answer is None or isinstance(answer, str):
        return type(got) is type(answer) and got == answer
    try:
        return matches(got, answer)
    except (ValueError, TypeError):
        return False


def _shaped(got: Any, answer: Any) -> bool:
    """The same structure and shapes: a value the mistake could have given."""
    if isinstance(answer, dict):
        return isinstance(got, dict) and all(
            key in got and _shaped(got[key], value) for key, value in answer.items())
    if isinstance(answer, (tuple, list)):
        return (isinstance(got, (tuple, list)) and len(got) == len(answer)
                and all(_shaped(g, a) for g, a in zip(got, answer)))
    if answer is None or isinstance(answer, str):
        return type(got) is type(answer)
    try:
        return np.shape(got) == np.shape(answer)
    except (ValueError, TypeError):
        return False


def _part(correct: Any, candidate: Any) -> Any:
    """The part of the reference's answer that ``candidate`` (a mistaken one) decides: for a
    dict, its keys; None where the reference answers nothing there (it refused the call, or
    lacks a key the mistake gives: the two differ)."""
    if correct is None or not isinstance(candidate, dict):
        return correct
    if not isinstance(correct, dict) or set(candidate) - set(correct):
        return None
    return {key: correct[key] for key in candidate}


def probe_input_line(exercise: Exercise, call: tuple) -> str:
    """The probe's own call, each argument under its parameter's name (an operation's left out
    where it has its default)."""
    from .assertions import fmt

    name, args, kwargs, _ = call
    try:
        if name in exercise.references:
            signature = inspect.signature(exercise.references[name])
        else:  # an operation: its parameters after the module
            signature = inspect.signature(exercise.operations[name])
            signature = signature.replace(parameters=list(signature.parameters.values())[1:])
        bound = signature.bind(*args, **kwargs).arguments
        bound = {k: v for k, v in bound.items() if name in exercise.references
                 or not _is_default(v, signature.parameters[k].default)}
    except (KeyError, TypeError, ValueError):
        bound = {**{f"argument {i}": a for i, a in enumerate(args)}, **kwargs}
    shown = ", ".join(f"{k} {fmt(v)}" for k, v in bound.items())
    return f"The mistake shows on the probe's input ({name}): {shown}"


def _is_default(value: Any, default: Any) -> bool:
    return value is default or (isinstance(default, (str, bool, int, float))
                                and type(value) is type(default) and value == default)


# -- comparing an answer with the mistaken version --------------------------------------------
RTOL, ATOL = 1e-5, 1e-8  # loose enough for float64 work, far tighter than any probe's gap
# A float32 answer (a check's float32 example) is compared as the checks compare float32.
RTOL32, ATOL32 = 1e-4, 1e-5


def matches(got: Any, mistaken: Any) -> bool:
    """The submission's answer is the mistaken version's, NaNs in the same places included."""
    got, mistaken = np.asarray(got), np.asarray(mistaken)
    if got.shape != mistaken.shape or got.dtype.kind not in "biuf":
        return False
    if mistaken.dtype == np.bool_:
        return bool(np.array_equal(got, mistaken))
    rtol, atol = (RTOL32, ATOL32) if np.float32 in (got.dtype, mistaken.dtype) else (RTOL, ATOL)
    return bool(np.allclose(got.astype(np.float64), mistaken, rtol=rtol, atol=atol,
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
    added where blocked) or another ``scale`` than 1/sqrt(d_k); NumPy in, float64 NumPy out
    (``attention_tensors``)."""
    tq, tk, tv = (torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    blocked = None if mask is None else torch.from_numpy(np.asarray(mask))
    output, weights = attention_tensors(tq, tk, tv, blocked, when=when, polarity=polarity,
                                        fill=fill, additive=additive, scale=scale)
    return output.numpy(), weights.numpy()


def attention_tensors(tq, tk, tv, blocked=None, *, when="before", polarity=True, fill=-np.inf,
                      additive=None, scale=None):
    """``attention_with`` on tensors (autograd follows it): output and weights. In torch, its
    output from F.scaled_dot_product_attention wherever the mistake allows: neither the NumPy
    `attention` nor `mha` (no library attention) can take it as an answer."""
    scale = tq.shape[-1] ** -0.5 if scale is None else scale
    scores = tq @ tk.transpose(-1, -2) * scale
    bias = torch.zeros_like(scores)  # what turns the scores into the mistaken ones
    if blocked is not None and not polarity:
        blocked = ~blocked
    if blocked is not None and additive is not None:
        bias = bias + blocked * additive
    elif blocked is not None and when == "before":
        bias = torch.where(blocked, fill - scores, bias)  # blocked scores become `fill`
    weights = torch.softmax(scores + bias, dim=-1)
    if blocked is not None and when == "after":
        weights = weights.masked_fill(blocked, 0.0)
        return weights @ tv, weights
    output = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=bias, scale=scale)
    # torch's attention gives a row with no allowed key zeros; the unchecked mistake gives NaN
    output = output.masked_fill(weights.isnan().any(-1, keepdim=True), float("nan"))
    return output, weights


MASK3 = np.array([[False, True, False], [False, False, True], [True, False, False]])
FULLY_MASKED2 = np.array([[False, True], [True, True]])
# What a row with no allowed key gives without the check: NaN (-inf fill), uniform weights (a
# large finite fill), or the row's unmasked weights (a large negative number added to every
# score of the row, which the softmax's shift cancels).
FULLY_MASKED_MISTAKES = ({"fill": -np.inf}, {"fill": -1e9}, {"additive": -1e9})
