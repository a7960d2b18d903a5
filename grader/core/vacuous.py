"""No points for ignoring the input.

A uniform softmax meets "every row sums to 1" and "adding a constant changes nothing" whatever
its input, and rejects NaN as the key does: those checks pass, and show nothing. So each
exercise declares informative inputs for what the student writes (``@EX.informative_inputs``):
``GROUPS`` groups of ``PER_GROUP`` calls, each group of one structure (shape, dtype, axis,
module) and each call of its own values, drawn with the checks' strategies as Hypothesis
generates an example (the same ranges and seeded values on the 1/8 grid: each is an input a
check could send; ``strategies.Draw``), from the course secret, and drawn again until the
reference's own answers to them move (``informative``). The calls are made in the visible
checks' worker, each before a check that the secret chooses (``InformativeCalls``), so neither
their values nor their order tells them from a check's.

Next to the reference's answers to the same calls, a call shows nothing of its input when it
gives no answer (any exception, no array, a call past its time limit), or its result (any part
of it: attention's weights alone) is one of its arguments as it was given (softmax returning
the logits) or holds one repeated value (every weight 1/T, a mask that blocks nothing), each
within ``TOLERANCE`` of what the reference's answer moves; and a group shows nothing when each
of its calls does, or its results are the same for its different inputs (a fixed array). A
function whose every group shows nothing ignores its input (``ignores_input``): every check that
called it (or the operation) passes without its points, with one line that says why. A part of
one number (a length, a count) is never judged, and a module whose layers cannot take the call's
weights is left to the checks on its layers. Every other result, however wrong, keeps the points
of the checks it passes: an answer that moves with its input on one structure of the three is
not judged to ignore it.
"""

from __future__ import annotations

import copy
import functools
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..sandbox.errors import CallTimedOut, StudentError
from .exercise import Exercise, Informative
from .results import CheckResult
from .strategies import Draw
from .student import NotImplementedYet

NO_POINTS = "Passed, but no points: {label} ignores its input ({why}), so this property holds " \
            "whatever the input and shows nothing."
# An answer ignores its input where it moves less than this fraction of what the reference's
# answer moves (between two inputs, from one entry to the next, from an argument). Far
# above rounding (1e-16 in float64, 6e-8 in float32: a right answer moves as the reference's
# does, to within them) and far below how much any honest answer in the zoo moves; noise
# that is a thousandth of the answer's own change is no use of the input.
TOLERANCE = 1e-3
# How much the reference's own answers must move (relative to their size, at least 1) for a
# drawn set of calls to be informative: well clear of rounding, so the tolerance above is a
# fraction of a real change.
FLOOR = 1e-2
# What the worker's ``load_state`` says of a module whose parameters cannot take the weights a
# call sends: a module of another shape than the contract's is judged by the checks on its
# layers, and its failing to load them tells nothing of whether its answers use their input
# (a GroupedQueryAttention whose keys keep the full width answers no call with groups).
MISFIT = "has another shape than"
# The whole line ``operation_helpers.load_state`` writes: a student's own text (a class named
# "has another shape than", whose instance the worker calls "a has another shape than") never
# matches it.
MISFIT_LINE = re.compile(r"\w+\.\w+ is missing or has another shape than \((\d+(, \d+)*,?)?\)")
GROUPS, PER_GROUP = 3, 2  # structures, and calls of each: a wrong answer is the same for two
# inputs by chance (a hard maximum, a mask) or constant on some structure (softmax along a
# length-1 axis) far more often than on three structures
CALLS = GROUPS * PER_GROUP
DRAWS = 2000  # sets of calls drawn at most before an exercise's declaration is taken to be wrong


def parts(value: Any) -> Iterator[np.ndarray]:
    """The numeric arrays of two entries or more in a result or in arguments, in order:
    dicts by key, tuples and lists of arrays one by one, a list of numbers as one array."""
    if isinstance(value, dict):
        for key in sorted(value, key=str):
            yield from parts(value[key])
    elif isinstance(value, (list, tuple)) and any(
            isinstance(v, (dict, list, tuple, np.ndarray)) for v in value):
        for item in value:
            yield from parts(item)
    else:
        try:
            array = np.asarray(value)
        except Exception:  # a ragged list, an object that will not convert
            return
        if array.dtype.kind in "biuf" and array.size >= 2:
            yield array


def distance(a: np.ndarray, b: Any) -> float:
    """The largest difference between ``a`` and ``b`` (same shape, or a number), entry by
    entry: equal infinities and two NaNs are no difference, a NaN against a number is an
    infinite one."""
    x = np.asarray(a, dtype=np.float64)
    y = np.broadcast_to(np.asarray(b, dtype=np.float64), x.shape)
    same = (x == y) | (np.isnan(x) & np.isnan(y))
    with np.errstate(invalid="ignore", over="ignore"):
        gap = np.where(same, 0.0, np.abs(x - y))
    gap = np.where(np.isnan(gap), np.inf, gap)
    return float(gap.max()) if gap.size else 0.0


def spread(a: np.ndarray) -> float:
    """How far the entries of ``a`` are from its first: 0 for one repeated value."""
    return distance(a, np.asarray(a, dtype=np.float64).flat[0])


def _floor(part: np.ndarray) -> float:
    finite = np.asarray(part, dtype=np.float64)
    finite = np.abs(finite[np.isfinite(finite)])
    return FLOOR * max(1.0, float(finite.max()) if finite.size else 1.0)


def _arguments(args: tuple) -> list[np.ndarray]:
    return list(parts(list(args)))


def groups(calls: list[Any]) -> list[list[Any]]:
    """``calls`` (anything kept per informative call) cut into their groups, in order."""
    return [calls[g * PER_GROUP:(g + 1) * PER_GROUP] for g in range(GROUPS)]


def informative(inputs: list[tuple], answers: list[Any]) -> bool:
    """Whether the reference's ``answers`` to one group's calls ``inputs`` can show that
    another answer ignores its input: no two inputs are equal; every part of each answer holds
    more than one value and is clear of each argument of its shape; and a part of floats of one
    shape in two answers differs between them (a part of integers or bools, such as the
    lengths of a cache, may be the same)."""
    if any(_same_call(a, b) for i, a in enumerate(inputs) for b in inputs[i + 1:]):
        return False
    outputs = [list(parts(a)) for a in answers]
    if not all(outputs) or len({len(o) for o in outputs}) != 1:
        return False
    for args, output in zip(inputs, outputs):
        for part in output:
            if spread(part) < _floor(part):
                return False
            if any(a.shape == part.shape and distance(part, a) < _floor(part)
                   for a in _arguments(args)):
                return False
    for i, first in enumerate(outputs):
        for second in outputs[i + 1:]:
            for x, y in zip(first, second):
                if (x.shape == y.shape and x.dtype.kind == "f"
                        and distance(x, y) < max(_floor(x), _floor(y))):
                    return False
    return True


def _same_call(a: tuple, b: tuple) -> bool:
    """The two calls' arguments are equal, arrays entry by entry."""
    def key(args: Any) -> Any:
        if isinstance(args, dict):
            return tuple((k, key(v)) for k, v in sorted(args.items(), key=lambda kv: str(kv[0])))
        if isinstance(args, (list, tuple)):
            return tuple(key(v) for v in args)
        if isinstance(args, np.ndarray):
            return (args.dtype.str, args.shape, args.tobytes())
        return repr(args)

    return key(a) == key(b)


def ignores_input(inputs: list[tuple], results: list[Any], answers: list[Any]) -> str | None:
    """Why the ``results`` of the informative calls with ``inputs`` ignore their input, next to
    the reference's ``answers`` to the same calls, or None. A result that is an exception (a
    ``StudentError``, or any ``BaseException``) or holds no array gave no answer. A part of a
    result is judged against the reference's part in the same place; each rule holds where the
    reference's own answer moves (``informative`` draws the inputs so that it does)."""
    references = [list(parts(a)) for a in answers]
    outputs: list[list[np.ndarray] | None] = []
    for result, reference in zip(results, references):
        output = None if isinstance(result, BaseException) else list(parts(result))
        outputs.append(output if output or not reference else None)
    raised = [r for r in results if isinstance(r, BaseException)]
    silence = _raised(raised[0]) if raised else "it returned no array for a valid input"
    answered = [o for o in outputs if o is not None]
    if not answered:
        return silence
    for index in range(min(len(o) for o in answered + references)):
        got = [None if o is None else o[index] for o in outputs]
        want = [r[index] for r in references]
        arguments = {i for i, (args, g, w) in enumerate(zip(inputs, got, want))
                     if g is not None and any(
                         a.shape == g.shape == w.shape
                         and distance(g, a) <= TOLERANCE * distance(w, a)
                         for a in _arguments(args))}
        constant = {i for i, (g, w) in enumerate(zip(got, want))
                    if g is not None and spread(g) <= TOLERANCE * spread(w)}
        quiet = arguments | constant | {i for i, g in enumerate(got) if g is None}
        if all(set(group) <= quiet or _same(got, want, group)
               for group in groups(list(range(len(got))))):
            if len(answered) < len(got):
                return silence
            if len(arguments) == len(got):
                return "it returned one of its arguments unchanged"
            if len(constant) == len(got):
                return "every entry of its result is the same number"
            return "it returned the same result for different inputs"
    return None


def _same(got: list[Any], want: list[np.ndarray], group: list[int]) -> bool:
    """The answers of a group of calls are the same, where the reference's all differ."""
    answered = [i for i in group if got[i] is not None]
    pairs = [(i, j) for n, i in enumerate(answered) for j in answered[n + 1:]]
    return bool(pairs) and len({got[i].shape for i in answered}) == 1 and all(
        distance(want[i], want[j]) > 0
        and distance(got[i], got[j]) <= TOLERANCE * distance(want[i], want[j])
        for i, j in pairs)


def _raised(error: BaseException) -> str:
    if isinstance(error, CallTimedOut):
        return "it gave no answer within its time limit"
    if isinstance(error, NotImplementedYet):
        return "it raised NotImplementedError on a valid input"
    return f"it raised {getattr(error, 'type', type(error).__name__)} on a valid input"


def misfit(exercise: Exercise, call: str, error: StudentError) -> bool:
    """Whether ``error``, raised by the informative call ``call``, is its module failing to take
    the call's weights (``MISFIT``): only an operation loads weights, and only in the worker's
    own words. On d63756d any reply whose message held the words did, so a softmax that
    returned, on one informative call, an object of a class named "has another shape than"
    was never judged, and a uniform softmax kept 7 of 15 (issue 36)."""
    return (call in exercise.operations and bool(error.info.get("bad_return"))
            and MISFIT_LINE.fullmatch(str(error.info.get("message"))) is not None)


@dataclass(frozen=True)
class Drawn:
    """The informative inputs of one function, and the reference's answers to them."""

    inputs: list[tuple]
    answers: list[Any]


@functools.lru_cache(maxsize=256)
def drawn(exercise: Exercise, call: str, secret: str) -> Drawn:
    """The informative inputs of ``call``, drawn from the course secret (fixed without one):
    each of the ``GROUPS`` groups is drawn as the exercise declares it until the reference's
    answers to its calls are ``informative``."""
    info = next(i for i in exercise.informative if i.call == call)
    rng = np.random.default_rng(zlib.crc32(f"{secret}informative.{exercise.name}.{call}"
                                           .encode()))
    inputs: list[tuple] = []
    answers: list[Any] = []
    for _group in range(GROUPS):
        for _ in range(DRAWS):
            calls = info.examples(Draw(int(rng.integers(2**63))), PER_GROUP)
            try:
                replies = [info.reference(*copy.deepcopy(args)) for args in calls]
            except ValueError:  # not an input the contract accepts: draw again
                continue
            if len(calls) == PER_GROUP and informative(calls, replies):
                inputs += calls
                answers += replies
                break
        else:
            raise RuntimeError(f"{exercise.name}: no informative inputs of {call} in {DRAWS} "
                               "draws")
    return Drawn(inputs, answers)


def examples(exercise: Exercise, call: str, secret: str) -> list[tuple]:
    """The informative inputs of ``call`` (``drawn``), a copy the caller may keep."""
    return copy.deepcopy(drawn(exercise, call, secret).inputs)


class InformativeCalls:
    """The informative calls of one exercise's visible worker, each made before one of its
    ``slots`` visible checks, which the course secret chooses (never after the last: the
    worker's last calls are a check's own); ``due(slot)`` makes those due before check
    ``slot``. What each call gave (an answer, or the exception it raised) is kept for
    ``verdicts``."""

    def __init__(self, exercise: Exercise, student: Any, secret: str, slots: int):
        self.exercise, self.student, self.secret = exercise, student, secret
        rng = np.random.default_rng(zlib.crc32(f"{secret}informative.places.{exercise.name}"
                                               .encode()))
        self.places: dict[int, list[tuple[Informative, int]]] = {}
        for info in exercise.informative:
            for index in range(CALLS):
                place = int(rng.integers(0, slots))
                self.places.setdefault(place, []).append((info, index))
        self.results: dict[str, dict[int, Any]] = {i.call: {} for i in exercise.informative}
        self.misfit: set[str] = set()  # calls whose module could not take their weights

    def due(self, slot: int) -> None:
        for info, index in self.places.get(slot, []):
            if info.call in self.misfit:
                continue
            args = drawn(self.exercise, info.call, self.secret).inputs[index]
            try:
                reply: Any = getattr(self.student, info.call)(*copy.deepcopy(args))
            except (NotImplementedYet, CallTimedOut) as error:  # after a CallTimedOut, the
                reply = error  # next call gets a fresh worker
            except StudentError as error:
                if misfit(self.exercise, info.call, error):
                    self.misfit.add(info.call)
                    continue
                reply = error
            self.results[info.call][index] = reply


def verdicts(calls: InformativeCalls) -> dict[str, str]:
    """For each name (function or operation) whose result ignores its input: the line its
    checks get."""
    found: dict[str, str] = {}
    for info in calls.exercise.informative:
        results = calls.results[info.call]
        if info.call in calls.misfit or len(results) != CALLS:
            continue
        known = drawn(calls.exercise, info.call, calls.secret)
        why = ignores_input(known.inputs, [results[i] for i in range(CALLS)], known.answers)
        if why:
            for name in info.covers:
                found.setdefault(name, NO_POINTS.format(label=info.label, why=why))
    return found


def withhold(result: CheckResult, called: set[str], found: dict[str, str]) -> None:
    """Take a passed check's points away when it called something that ignores its input."""
    line = next((found[name] for name in sorted(called) if name in found), None)
    if result.passed and line:
        result.passed, result.points = False, 0
        result.feedback = f"Property: {result.prop}\n{line}"
