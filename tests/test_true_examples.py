"""Every example a student reads can be pasted back (issue 47): an example a check shows by
hand (``ctx.show``) holds every argument of the call it makes next, by the names the contract
gives them, with the values the call had, and nothing the call did not take.

On c6e9838 attention_backward's bad-input check showed "q [[[1, 1], [1, 1]], ...], grad_output
[[[1, 1], [1, 1]]]" for ``attention_backward(q, k, v, grad_output)`` (no k, no v), merge_heads'
check showed "y ..." for ``merge_heads(x)``, and decode's showed "lengths [(3, 2)]" or
"devices ['cpu', 'meta']" for the keys and values it appended.

Every check of every exercise runs here on the answer key, in this process (``AnswerKey``):
the key passes them all, so every example a check writes is reached, and each call after one
is held to it.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
from submission_tools import EXERCISES, SOLUTIONS

from grader.core.answer_key import AnswerKey, _key_module
from grader.core.exercise import Context
from grader.sandbox.errors import StudentError

# An operation's arguments that the kit adds itself, which no call of the student's code
# takes: where it runs, the gradient the kit back-propagates, whether a missing weight is
# skipped.
KIT_SUPPLIED = frozenset({"device", "grad_y", "skip_missing"})
# An operation's argument that stands for another of the student's call: flash_peak builds
# the causal mask in the worker (so that it counts in the peak), flash_attention takes it.
STANDS_FOR = {("flash_peak", "causal"): "mask"}


def shown_arguments(example: dict[str, Any]) -> dict[str, Any]:
    """The example as the report shows it: a NamedTuple case's fields each under its name."""
    found: dict[str, Any] = {}
    for name, value in example.items():
        found.update(zip(value._fields, value) if hasattr(value, "_fields") else [(name, value)])
    return found


def same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys()
                and all(same(a[k], b[k]) for k in a))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    x, y = np.asarray(a), np.asarray(b)
    return x.dtype == y.dtype and bool(np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"))


def signatures(exercise: Any) -> dict[str, inspect.Signature]:
    """The key's functions' signatures (the contract's), and each operation's, less the module
    it is given."""
    module = _key_module(SOLUTIONS.resolve(), exercise.name)
    found = {name: inspect.signature(getattr(module, name)) for name in exercise.functions}
    for name, operation in exercise.operations.items():
        signature = inspect.signature(operation)
        found[name] = signature.replace(parameters=list(signature.parameters.values())[1:])
    return found


class Recorder:
    """The answer key as the checks' student, holding the first call after each example a
    check shows by hand to that example."""

    def __init__(self, exercise: Any, ctx: Context, problems: dict[str, set[str]]):
        self._key = AnswerKey(SOLUTIONS, exercise)
        self._signatures = signatures(exercise)
        self._measured = {n for n, op in exercise.operations.items()
                          if getattr(op, "measured", False)}
        self._ctx, self._problems = ctx, problems
        self.check = ""
        self.pending = False  # an example was shown and no call has followed it yet

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        answer = getattr(self._key, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.pending:
                self.pending = False
                for problem in self._held_to_example(name, args, kwargs):
                    self._problems.setdefault(self.check, set()).add(f"{name}: {problem}")
            try:
                reply = answer(*args, **kwargs)
            except ValueError as error:  # as the worker reports the student's ValueError
                raise StudentError({"type": "ValueError", "message": str(error),
                                    "value_error": True}) from None
            return (reply[0], 0) if name in self._measured else reply

        return call

    def _held_to_example(self, name: str, args: tuple, kwargs: dict) -> list[str]:
        shown = shown_arguments(self._ctx.example)
        signature = self._signatures[name]
        problems = []
        for argument, value in signature.bind(*args, **kwargs).arguments.items():
            if argument in KIT_SUPPLIED:
                continue
            argument = STANDS_FOR.get((name, argument), argument)
            if argument not in shown:
                problems.append(f"{argument} not shown")
            elif argument not in STANDS_FOR.values() and not same(shown[argument], value):
                problems.append(f"{argument} shown with another value than the call's")
        taken = {STANDS_FOR.get((name, p), p) for p in signature.parameters}
        problems += [f"{extra} shown, which the call does not take"
                     for extra in shown if extra not in taken]
        return problems


def test_every_example_a_check_shows_is_the_call_it_makes():
    problems: dict[str, set[str]] = {}
    shown = 0
    for exercise in EXERCISES.values():
        ctx = Context(None, AnswerKey(SOLUTIONS, exercise), ("cpu",))
        student = ctx.student = Recorder(exercise, ctx, problems)
        writes = ctx.show

        def show(*, drawn: bool = False, _writes=writes, _student=student, **inputs: Any) -> None:
            nonlocal shown
            shown += 1
            _writes(**inputs, **({"drawn": True} if drawn else {}))
            _student.pending = True

        object.__setattr__(ctx, "show", show)
        for check in exercise.checks:
            student.check = f"{exercise.name}.{check.name}"
            student.pending = False
            check.run(ctx, examples=3)
    assert shown > 100  # every check that writes an example, each example of it
    assert problems == {}
