"""Checks and their grading metadata, declared next to each check.

A check is a function of one argument, the ``Context``; it passes by returning and fails by
raising (``CheckFailed`` from ``grader.assertions``, or the student's own exception). Most are
Hypothesis property tests::

    @check("softmax", points=2, prop="Every slice along `axis` sums to 1.")
    @given(case=strategies.logits_and_axis())
    def test_slices_sum_to_one(ctx, case):
        ...

``hidden=True`` marks a check students do not see the code of (answer-key comparisons);
Gradescope shows it after grades are published.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, seed, settings

settings.register_profile(
    "grading",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=10,
    print_blob=False,
    report_multiple_bugs=False,
    verbosity=Verbosity.quiet,
    suppress_health_check=list(HealthCheck),
    # No "explain" phase: it replays a failing example many times to annotate it, which the
    # feedback never shows, and costs seconds of the exercise's time budget per failing check.
    phases=[p for p in Phase if p is not Phase.explain],
)
GRADING = settings.get_profile("grading")


@dataclass
class Context:
    """What a check sees: the student's functions, the answer key's (or None), devices."""

    student: Any
    key: Any = None
    devices: tuple[str, ...] = ("cpu",)
    example: dict[str, Any] = field(default_factory=dict)  # the inputs of the current example

    def show(self, **inputs: Any) -> None:
        """Record the inputs a non-Hypothesis check is about to use, for its feedback."""
        self.example = dict(inputs)


@dataclass(frozen=True)
class Check:
    exercise: str
    name: str
    points: int
    prop: str
    func: Callable[[Context], None]
    hidden: bool = False

    @property
    def visibility(self) -> str:
        return "after_published" if self.hidden else "visible"

    def run(self, ctx: Context) -> None:
        ctx.example = {}
        self.func(ctx)


CHECKS: list[Check] = []


def _is_data(value: Any) -> bool:
    return type(value).__name__ == "DataObject"


def _record_draws(data: Any, ctx: Context) -> None:
    """Make labelled interactive draws (``data.draw(..., label=...)``) part of the shown example."""
    draw = data.draw

    def recording_draw(strategy: Any, label: Any = None) -> Any:
        value = draw(strategy, label=label)
        if label is not None:  # unlabelled draws are parts of a labelled input
            ctx.example[str(label)] = value
        return value

    data.draw = recording_draw


def check(exercise: str, *, points: int, prop: str, hidden: bool = False, examples: int = 0):
    """Register a check. ``examples`` overrides the profile's example count."""

    def decorate(func: Callable) -> Callable:
        runnable = func
        hypothesis = getattr(func, "hypothesis", None)
        if hypothesis is not None:
            inner = hypothesis.inner_test

            def recorded(ctx: Context, **kwargs: Any) -> None:
                # Hypothesis replays the smallest failure last, so what is recorded here at
                # the end is the counterexample to show.
                ctx.example = {k: v for k, v in kwargs.items() if not _is_data(v)}
                for value in kwargs.values():
                    if _is_data(value):
                        _record_draws(value, ctx)
                inner(ctx, **kwargs)

            hypothesis.inner_test = recorded
            runnable = settings(GRADING, max_examples=examples or GRADING.max_examples)(func)
            # A fixed seed per check, from its name: the same examples as derandomize gives,
            # run to run, without hashing the check's source text on every run.
            runnable = seed(zlib.crc32(f"{exercise}.{func.__name__}".encode()))(runnable)
        CHECKS.append(Check(exercise, func.__name__, points, prop, runnable, hidden))
        return func

    return decorate


def checks_for(exercise: str, *, hidden: bool = True) -> list[Check]:
    from . import checks  # noqa: F401  (registers the checks)

    return [c for c in CHECKS if c.exercise == exercise and (hidden or not c.hidden)]
