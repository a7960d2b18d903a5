"""The order of a submission's work: every exercise's visible phase, its verdicts final, then
every exercise's hidden phase.

The workers of one machine share more than their files: the page cache of the files every
worker maps (the interpreter, its libraries), the CPUs, the clock. A hidden phase can leave a
mark there (pages it made resident, time it spent) that a later worker can read. A visible
phase that ran after it could then raise that mark, a bit of a hidden input, in its own
feedback, which the student reads before grades are published. So no visible phase of a
submission runs after any of its hidden phases: ``graded`` runs every exercise's visible phase
(its checks, informative calls and diagnosis, ``engine.visible_phase``), side by side in lanes
(``lanes.Pool``), waits for all of them (each worker has ended when its phase
returns), fixes their verdicts as bytes (``Seen.frozen``), hands them to the route
(``written``), and only then runs the hidden phases (``engine.hidden_phase``), in the same
lanes, each sent its plan (``Plan``).
The final result of each exercise is made from its frozen bytes with the hidden checks added:
nothing a hidden phase does can change a visible byte.

One submission is graded this way on every route: ``grade`` (lanes side by side), Gradescope
(one lane), and each grader process of a batch (one lane per student). What a hidden phase
leaves for a later submission, of the same student or another, is out of this order's reach
(docs/instructors.md, "Other users and shared hosts").
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..sandbox.isolation import OUTPUT_CAP, TRUNCATED, Limits, Spent
from . import lanes
from .results import CheckResult, ExerciseResult

# What each hidden check of an exercise reads in the visible part (``written``): the hidden
# phase has not run yet. A route that writes it and is then stopped leaves this, not a score
# that looks final.
NOT_YET = "the hidden checks had not run when this was written"


@dataclass
class Plan:
    """What an exercise's hidden phase takes from its visible phase: the hidden checks to run
    (by name), the exercise's ``limits`` less the seconds its files took to read (``spent``),
    the visible diagnosis (``found``), whether a visible check failed (``failing``), and why
    each judged function ignores its input over the visible checks' calls (``uses``: None where
    it uses it), for hidden checks whose own calls cannot tell."""

    checks: list[str]
    limits: dict[str, Any]
    found: list[str] = field(default_factory=list)
    failing: bool = False
    uses: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def of(cls, checks: list[str], limits: Limits, **fields: Any) -> Plan:
        return cls(checks, dataclasses.asdict(limits), **fields)

    def exercise_limits(self) -> Limits:
        return Spent(**self.limits) if "spent" in self.limits else Limits(**self.limits)


@dataclass
class Seen:
    """A visible phase's outcome: the exercise's result (its visible checks) and the plan of
    its hidden phase (None: none to run)."""

    result: ExerciseResult
    plan: Plan | None = None

    @classmethod
    def from_dict(cls, fields: dict[str, Any]) -> Seen:
        plan = fields["plan"]
        return cls(ExerciseResult.from_dict(fields["result"]),
                   Plan(**plan) if plan is not None else None)

    def frozen(self) -> bytes:
        """The visible verdicts as bytes: each output's visible part is made from these."""
        return json.dumps(self.result.to_dict(), sort_keys=True).encode()


@dataclass
class Added:
    """What a hidden phase adds to its exercise: its checks' results, and what the worker
    printed (for the instructor)."""

    checks: list[CheckResult]
    printed: str = ""

    @classmethod
    def from_dict(cls, fields: dict[str, Any]) -> Added:
        return cls([CheckResult(**c) for c in fields["checks"]], fields["printed"])


def graded(names: list[str], visible: Callable[[str], Seen],
           hidden: Callable[[str, Plan], Added], jobs: int, *,
           ready: Callable[[str], bool] = lambda name: True,
           finished: Callable[[str, ExerciseResult], None] = lambda name, result: None,
           written: Callable[[dict[str, ExerciseResult]], None] = lambda results: None,
           pending: Callable[[str, str], CheckResult] | None = None,
           working: list[str] | None = None) -> dict[str, ExerciseResult]:
    """Every visible phase of ``names`` (``visible(name)``), then, once all are done and
    ``written`` has been given their results, every hidden phase (``hidden(name, plan)``);
    ``jobs`` lanes at a time (``lanes.Pool``: the same lanes for both). Returns the results by
    name, in the order of ``names``. Only the names in ``working`` (default: all) need a lane:
    the others (a file missing) are graded here, and ``finished`` is not called for them.
    ``finished(name, result)`` is called as each of the others is done, both its phases;
    ``pending(name, check)`` is what a hidden check not yet run reads in ``written``'s results
    (by default they are left out)."""
    working = names if working is None else working

    def task(line: str) -> Seen | Added:
        """A lane's line: an exercise's name (its visible phase), or its hidden phase's."""
        if not line.startswith("{"):
            return visible(line)
        sent = json.loads(line)
        return hidden(sent["name"], Plan(**sent["plan"]))

    with lanes.Pool(task, jobs) as pool:  # the same lanes for both phases
        seen = pool.graded(working, Seen.from_dict, ready,
                           lambda name, s: s.plan is None and finished(name, s.result))
        seen.update({name: visible(name) for name in names if name not in seen})
        frozen = {name: seen[name].frozen() for name in names}
        plans = {name: s.plan for name, s in seen.items() if s.plan is not None}
        del seen  # from here on, the visible verdicts are the frozen bytes alone
        shown = {name: _thawed(data) for name, data in frozen.items()}
        if pending is not None:
            for name, plan in plans.items():
                shown[name].checks += [pending(name, check) for check in plan.checks]
        written(shown)
        added = pool.graded(
            list(plans), Added.from_dict, ready,
            lambda name, a: finished(name, _with(frozen[name], a)), phase="hidden",
            task=lambda name: json.dumps({"name": name, "plan": dataclasses.asdict(plans[name])}))
    return {name: _with(frozen[name], added.get(name)) for name in names}


def _thawed(data: bytes) -> ExerciseResult:
    return ExerciseResult.from_dict(json.loads(data))


def _with(frozen: bytes, added: Added | None) -> ExerciseResult:
    """An exercise's result: its frozen visible part, and what its hidden phase added."""
    result = _thawed(frozen)
    if added is not None:
        result.checks += added.checks
        result.output = joined_output(result.output, added.printed)
    return result


def joined_output(visible: str, hidden: str) -> str:
    """What the two workers of an exercise printed, for the instructor, within one cap."""
    if not hidden or visible.endswith(TRUNCATED):
        return visible
    text = visible + ("\n" if visible else "") + "[during the hidden checks]\n" + hidden
    return text if len(text) <= OUTPUT_CAP else text[:OUTPUT_CAP] + TRUNCATED
