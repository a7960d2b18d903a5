"""No points for ignoring the input.

A uniform softmax meets "every row sums to 1" and "adding a constant changes nothing" whatever
its input, and rejects NaN as the key does: those checks pass, and show nothing. So each
exercise declares informative inputs for what the student writes (``@EX.informative_inputs``:
two calls whose answers differ, drawn from the course secret, so a file cannot know them in
advance). After the visible checks and the diagnosis, in the same worker, the student's code is
called on them, and a result that

1. is one of its arguments as it was given (softmax returning the logits, attention returning
   ``v``),
2. is the same for both inputs (uniform weights, zeros, a fixed array), or
3. holds one repeated value (a mask that blocks nothing, every weight 1/T),

ignores its input: every check that called that function (or operation) passes without its
points, with one line that says why. So does one that raises ValueError on these valid inputs:
the checks it passes by raising one (bad input refused) show nothing either. This holds for
any part of a result (attention's weights alone); a part of one number (a length, a count) is
never judged. Every other result, however wrong, keeps the points of the checks it passes.
What it does not stop: a file that answers uniformly to the checks and otherwise to these
last calls of its worker.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ..sandbox.isolation import CallTimedOut, StudentError
from .exercise import Exercise
from .student import NotImplementedYet, Student

if TYPE_CHECKING:
    from .engine import CheckResult

NO_POINTS = "Passed, but no points: {label} ignores its input ({why}), so this property holds " \
            "whatever the input and shows nothing."


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


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(a, b))


def ignores_input(examples: list[tuple], results: list[Any]) -> str | None:
    """Why the ``results`` of the calls with ``examples`` ignore their input, or None."""
    outputs = [list(parts(r)) for r in results]
    for args, output in zip(examples, outputs):
        if any(_same(o, a) for o in output for a in parts(list(args))):
            return "it returned one of its arguments unchanged"
    first, *others = outputs
    for other in others:
        if len(other) == len(first) and any(_same(a, b) for a, b in zip(first, other)):
            return "it returned the same result for two different inputs"
    for output in outputs:
        if any((o == o.flat[0]).all() for o in output):
            return "every entry of its result is the same number"
    return None


def examples(exercise: Exercise, call: str, secret: str) -> list[tuple]:
    """The informative inputs of ``call``, drawn from the course secret (fixed without one)."""
    info = next(i for i in exercise.informative if i.call == call)
    rng = np.random.default_rng(zlib.crc32(f"{secret}informative.{exercise.name}.{call}".encode()))
    return info.examples(rng)


def verdicts(exercise: Exercise, student: Student, secret: str) -> dict[str, str]:
    """For each name (function or operation) whose result ignores its input: the line its
    checks get. A call that raises (a stub, an error of the student's) proves nothing here:
    the checks it fails say so already."""
    found: dict[str, str] = {}
    for info in exercise.informative:
        inputs = examples(exercise, info.call, secret)
        try:
            results = [getattr(student, info.call)(*args) for args in inputs]
            why = ignores_input(inputs, results)
        except NotImplementedYet:
            continue
        except CallTimedOut:  # no answer, so nothing shows that it uses its input
            why = "it gave no answer within its time limit"
        except StudentError as error:  # a ValueError on valid input: its checks that pass by
            if not error.is_value_error:  # raising one (bad input refused) show nothing
                continue
            why = "it raised ValueError on a valid input too"
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
