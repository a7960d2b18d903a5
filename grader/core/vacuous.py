"""No points for ignoring the input.

A uniform softmax meets "every row sums to 1" and "adding a constant changes nothing" whatever
its input, and rejects NaN as the key does: those checks pass, and show nothing. So each
exercise declares informative inputs for what the student writes (``@EX.informative_inputs``):
``CALLS`` calls drawn as the checks draw theirs (the same ranges, shapes, dtypes and seeded
values on the 1/8 grid: each is an input a check could send), from the course secret, and drawn
again until the reference's own answers to them move (``informative``). The calls are made in
the visible checks' worker, each at a place among the checks that the secret chooses
(``InformativeCalls``), so neither their values nor their order tells them from a check's.

A result that, next to the reference's answers to the same calls,

1. is one of its arguments as it was given (softmax returning the logits, attention
   returning ``v``), on every call,
2. is the same for every input (uniform weights, zeros, a fixed array), or
3. holds one repeated value on every call (a mask that blocks nothing, every weight 1/T),

each within ``TOLERANCE`` of what the reference's answer moves (``ignores_input``), ignores its
input: every check that called that function (or operation) passes without its points, with
one line that says why. So does a call that gives no answer on these valid inputs: any
exception, a result with no array, a call past its time limit (a module whose layers cannot
take the call's weights is left to the checks on its layers). This holds for any part of a
result (attention's weights alone); a part of one number (a length, a count) is never judged.
Every other result, however wrong, keeps the points of the checks it passes: an answer that
moves with its input on one call of the three is not judged to ignore it.
"""

from __future__ import annotations

import copy
import functools
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..sandbox.isolation import CallTimedOut, StudentError
from .exercise import Exercise, Informative
from .strategies import Draw
from .student import NotImplementedYet

if TYPE_CHECKING:
    from .engine import CheckResult

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
CALLS = 3  # informative calls of each function: a wrong answer that varies little (a hard
# maximum, a mask) is the same for two inputs by chance far more often than for three
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


def informative(inputs: list[tuple], answers: list[Any]) -> bool:
    """Whether the reference's ``answers`` to the calls ``inputs`` can show that another
    answer ignores its input: no two inputs are equal; every part of each answer holds more
    than one value and is clear of each argument of its shape; and a part of floats of one
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
    """Why the ``results`` of the calls with ``inputs`` ignore their input, next to the
    reference's ``answers`` to the same calls, or None. A part of a result is judged against
    the reference's part in the same place, and each rule must hold on every call where the
    reference's own answer moves (``informative`` draws the inputs so that it does): "the
    same result" needs answers of one shape to every call, and the reference's all different."""
    outputs = [list(parts(r)) for r in results]
    references = [list(parts(a)) for a in answers]
    if any(reference and not output for output, reference in zip(outputs, references)):
        return "it returned no array for a valid input"
    count = min(len(o) for o in outputs + references)
    for index in range(count):
        got = [o[index] for o in outputs]
        want = [r[index] for r in references]
        if all(any(a.shape == g.shape == w.shape and distance(g, a) <= TOLERANCE * distance(w, a)
                   for a in _arguments(args))
               for args, g, w in zip(inputs, got, want)):
            return "it returned one of its arguments unchanged"
        pairs = [(i, j) for i in range(len(got)) for j in range(i + 1, len(got))]
        if (len({g.shape for g in got}) == len({w.shape for w in want}) == 1
                and all(distance(got[i], got[j]) <= TOLERANCE * distance(want[i], want[j])
                        and distance(want[i], want[j]) > 0 for i, j in pairs)):
            return "it returned the same result for different inputs"
        if all(spread(g) <= TOLERANCE * spread(w) for g, w in zip(got, want)):
            return "every entry of its result is the same number"
    return None


@dataclass(frozen=True)
class Drawn:
    """The informative inputs of one function, and the reference's answers to them."""

    inputs: list[tuple]
    answers: list[Any]


@functools.lru_cache(maxsize=256)
def drawn(exercise: Exercise, call: str, secret: str) -> Drawn:
    """The informative inputs of ``call``, drawn from the course secret (fixed without one):
    sets of ``CALLS`` calls are drawn as the exercise declares them until the reference's
    answers to one are ``informative``."""
    info = next(i for i in exercise.informative if i.call == call)
    draw = Draw(np.random.default_rng(
        zlib.crc32(f"{secret}informative.{exercise.name}.{call}".encode())))
    for _ in range(DRAWS):
        inputs = info.examples(draw, CALLS)
        try:
            answers = [info.reference(*copy.deepcopy(args)) for args in inputs]
        except ValueError:  # not an input the contract accepts: draw again
            continue
        if len(inputs) == CALLS and informative(inputs, answers):
            return Drawn(inputs, answers)
    raise RuntimeError(f"{exercise.name}: no informative inputs of {call} in {DRAWS} draws")


def examples(exercise: Exercise, call: str, secret: str) -> list[tuple]:
    """The informative inputs of ``call`` (``drawn``), a copy the caller may keep."""
    return copy.deepcopy(drawn(exercise, call, secret).inputs)


class InformativeCalls:
    """The informative calls of one exercise's visible worker, each made at its place among
    the ``slots`` places there (0: before the first visible check, ..., ``slots - 1``: after
    the last, and after the diagnosis), which the course secret chooses; ``due(slot)`` makes
    those of a place. What each call gave (an answer, or why it gave none) is kept for
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
        self.failed: dict[str, str] = {}  # call -> why it gave no answer
        self.misfit: set[str] = set()  # calls whose module could not take their weights

    def due(self, slot: int) -> None:
        for info, index in self.places.get(slot, []):
            if info.call in self.failed or info.call in self.misfit:
                continue
            args = drawn(self.exercise, info.call, self.secret).inputs[index]
            try:
                self.results[info.call][index] = getattr(self.student, info.call)(
                    *copy.deepcopy(args))
            except NotImplementedYet:
                self.failed[info.call] = "it raised NotImplementedError on a valid input"
            except StudentError as error:
                if error.info.get("bad_return") and MISFIT in str(error.info.get("message")):
                    self.misfit.add(info.call)
                else:
                    self.failed[info.call] = f"it raised {error.type} on a valid input"
            except CallTimedOut:  # the next call gets a fresh worker
                self.failed[info.call] = "it gave no answer within its time limit"


def verdicts(calls: InformativeCalls) -> dict[str, str]:
    """For each name (function or operation) whose result ignores its input: the line its
    checks get."""
    found: dict[str, str] = {}
    for info in calls.exercise.informative:
        why = calls.failed.get(info.call)
        results = calls.results[info.call]
        if why is None and len(results) == CALLS:
            known = drawn(calls.exercise, info.call, calls.secret)
            why = ignores_input(known.inputs, [results[i] for i in range(CALLS)],
                                known.answers)
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
