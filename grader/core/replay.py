"""Drawing a property's examples once, and replaying them on every later run.

A check's examples depend on its seed (its name, and the course secret for a hidden one), the
number of examples and its strategies, nothing else: Hypothesis, derandomized, draws the same
ones on every run, for as long as every one passes. So the first run of a check that passes
records them: each example's arguments, and the values its body drew from ``st.data()`` in the
order drawn. Every later run of the check in this process, or in a process forked after it (a
batch grades the answer key once before it forks its graders), calls the check's body on those
arguments directly, inside the same seeded random state as Hypothesis gives an example, and
draws nothing.

A replayed example that fails hands the whole check over to Hypothesis, which runs it from its
first example as if nothing had been replayed: it meets the same failure, shrinks it and
reports the smallest failing input, so what the student is told is what they would have been
told without the replay. The same goes for a body that asks for a draw the recording does not
hold (``Mismatch``). An exception that Hypothesis itself would not catch (the worker was lost,
the function is not implemented yet) ends the check at once, as it would under Hypothesis.

Nothing is recorded from a run in which an example did not complete (an assumption was not
met, a draw overran), since such a run cannot be replayed example for example.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .internals import deterministic_PRNG

# What Hypothesis counts as a failing example (``hypothesis.core.failure_exceptions_to_catch``,
# less pytest's own): anything else stops a check at once.
FAILURES = (Exception, SystemExit, GeneratorExit)


class Mismatch(BaseException):
    """The replayed body asked for a draw the recording does not hold. A BaseException, so no
    check's ``except Exception`` can take it for the student's error."""


@dataclass(frozen=True)
class Example:
    kwargs: dict[str, Any]  # the arguments; a data object's entry is its draws
    data: frozenset[str]  # which of them were data objects


_RECORDED: dict[tuple, tuple[Example, ...]] = {}


def _is_data(value: Any) -> bool:
    return type(value).__name__ == "DataObject"


def _describe(strategy: Any) -> str:
    return repr(strategy)


class DataObject:
    """Stands for ``st.data()`` in a replay, giving back the recorded draws in order. Named like
    Hypothesis's own, so the check's recorder shows its labelled draws."""

    def __init__(self, draws: list[tuple[Any, str, Any]]):
        self._draws = draws
        self.taken = 0

    def draw(self, strategy: Any, label: Any = None) -> Any:
        if self.taken >= len(self._draws):
            raise Mismatch
        want_label, want_strategy, value = self._draws[self.taken]
        if label != want_label or _describe(strategy) != want_strategy:
            raise Mismatch
        self.taken += 1
        return copy.deepcopy(value)

    @property
    def done(self) -> bool:
        return self.taken == len(self._draws)


def replayed(key: tuple, inner: Callable[..., None], ctx: Any) -> bool:
    """Run the recorded examples of ``key`` through ``inner`` (the check's Hypothesis inner
    test). True: every one passed, and the check passed. False: there is no recording, or an
    example failed or wanted another draw, and the check must run under Hypothesis."""
    examples = _RECORDED.get(key)
    if examples is None:
        return False
    for example in examples:
        data = {name: DataObject(example.kwargs[name]) for name in example.data}
        kwargs = {name: data.get(name) or copy.deepcopy(value)
                  for name, value in example.kwargs.items()}
        try:
            with deterministic_PRNG():
                inner(ctx, **kwargs)
        except (Mismatch, *FAILURES):
            return False
        if not all(d.done for d in data.values()):
            return False
    return True


@contextmanager
def recording(key: tuple, hypothesis: Any) -> Iterator[None]:
    """Record the examples the check whose Hypothesis handle is ``hypothesis`` runs inside the
    block; they are kept for ``key`` if the block ends normally (the check passed) and every
    example completed."""
    if key in _RECORDED:
        yield
        return
    inner = hypothesis.inner_test
    taken: list[Example] = []
    complete = [True]

    def recorder(ctx: Any, **kwargs: Any) -> None:
        record: dict[str, Any] = {}
        for name, value in kwargs.items():
            if _is_data(value):
                record[name] = _recording_draws(value)
            else:
                record[name] = copy.deepcopy(value)
        taken.append(Example(record, frozenset(n for n, v in kwargs.items() if _is_data(v))))
        try:
            inner(ctx, **kwargs)
        except BaseException:
            complete[0] = False
            raise

    hypothesis.inner_test = recorder
    try:
        yield
    finally:
        hypothesis.inner_test = inner
    # Only a run that passed reaches here, and in a run that passed, an example that raised
    # was one Hypothesis discarded (an unmet assumption, an overrun).
    if complete[0] and taken:
        _RECORDED[key] = tuple(taken)


def _recording_draws(data: Any) -> list[tuple[Any, str, Any]]:
    """Make ``data`` (Hypothesis's data object) note each draw; returns the list it fills."""
    draws: list[tuple[Any, str, Any]] = []
    draw = data.draw

    def noting(strategy: Any, label: Any = None) -> Any:
        value = draw(strategy, label=label)
        draws.append((label, _describe(strategy), copy.deepcopy(value)))
        return value

    data.draw = noting
    return draws


def forget() -> None:
    """Drop every recording (for tests that compare a replayed run with a drawn one)."""
    _RECORDED.clear()
