"""What grading gives: a check's, an exercise's and a submission's result, as the engine makes
them, and a class's student (``StudentRecord``): one typed record from the run to every output
(the report, results.json, the CSV, the class report, the exports, the gradebook), each of which
renders it at the edge; nothing reads back a text the kit wrote.

A record crosses processes and files as its own fields (``to_dict``, ``from_dict``: plain JSON,
no text to parse): a lane's reply, a batch grader's, a shard's, nbgrader's child's, and the
records ``batch --json-dir`` keeps for ``report`` and ``merge``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .course import number


@dataclass
class CheckResult:
    exercise: str
    name: str
    prop: str
    points: float
    max_points: float
    hidden: bool
    passed: bool
    feedback: str = ""

    @property
    def visibility(self) -> str:
        return "after_published" if self.hidden else "visible"


@dataclass
class ExerciseResult:
    name: str
    max_score: float
    track: str = "core"
    checks: list[CheckResult] = field(default_factory=list)
    error: str | None = None  # why the exercise could not be graded at all
    misconceptions: list[str] = field(default_factory=list)
    output: str = ""  # what the student's code printed: for the instructor only
    # False: the student did not start it: a bonus exercise whose file is not in the
    # submission, or an untouched stub (``not_implemented``: every check met the stub's
    # NotImplementedError). An untouched bonus stub lists no failing check and stays out of the
    # class's pass rates, as a missing file does; a core one still scores 0 on every check.
    attempted: bool = True

    @property
    def score(self) -> float:
        return 0 if self.error else number(sum(c.points for c in self.checks))

    @property
    def not_implemented(self) -> bool:
        """A stub, by its visible checks: whatever its hidden worker did, which must not change
        what they read ("Not implemented yet." in the notebook's visible test cell)."""
        shown = [c for c in self.checks if not c.hidden]
        return bool(shown) and all(c.feedback.startswith("not implemented yet") for c in shown)

    @property
    def listed(self) -> list[CheckResult]:
        """The checks an output lists: none for a bonus exercise not attempted (its file
        missing, or its stub untouched: skipping the bonus fails no test); every check
        otherwise, an untouched core stub's each failing (they are the points it costs)."""
        return [] if self.track == "bonus" and not self.attempted else self.checks

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, fields: dict[str, Any]) -> ExerciseResult:
        return cls(**{**fields, "checks": [CheckResult(**c) for c in fields["checks"]]})


@dataclass
class SubmissionResult:
    path: str
    results: dict[str, ExerciseResult]  # every graded exercise, in the course's order
    key_present: bool
    hidden_points_skipped: float = 0  # the core points of the hidden checks not run here
    hidden_bonus_points_skipped: float = 0  # and the bonus track's
    # The kernel's limits this machine could not give the workers (no cgroups): for the
    # instructor's report, empty where every limit held.
    limits_missing: list[str] = field(default_factory=list)

    @property
    def exercises(self) -> dict[str, ExerciseResult]:
        """The core exercises: their points make the score."""
        return {n: e for n, e in self.results.items() if e.track == "core"}

    @property
    def bonus(self) -> dict[str, ExerciseResult]:
        """The bonus track: graded when present, never part of the score."""
        return {n: e for n, e in self.results.items() if e.track == "bonus"}

    @property
    def score(self) -> float:
        return number(sum(e.score for e in self.exercises.values()))

    @property
    def max_score(self) -> float:
        return number(sum(e.max_score for e in self.exercises.values()))

    @property
    def bonus_score(self) -> float:
        return number(sum(e.score for e in self.bonus.values()))

    @property
    def bonus_max_score(self) -> float:
        return number(sum(e.max_score for e in self.bonus.values()))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, fields: dict[str, Any]) -> SubmissionResult:
        results = {name: ExerciseResult.from_dict(e) for name, e in fields["results"].items()}
        return cls(**{**fields, "results": results})


# What a class's student ended as, besides graded: ``kind`` is the status's short key (the
# class report's ``statuses``), set where the status is decided.
GRADED = "graded"
KINDS = ("graded", "empty", "not a folder", "too large", "timeout", "crashed", "out of memory",
         "no result", "not graded")


@dataclass
class StudentRecord:
    """One student of a class: their name (as ``outputs.inert.name`` shows a folder's), their
    status as the CSV writes it (``graded``, ``empty``, ``not graded: <why>``), its ``kind``
    (``KINDS``), their result when graded, and the workers' isolation where it was less than
    root's (``grader.sandbox.node``'s label)."""

    student: str
    status: str
    kind: str = ""
    result: SubmissionResult | None = None
    isolation: str = ""

    def __post_init__(self) -> None:
        if not self.kind:
            self.kind = GRADED if self.status == GRADED else "not graded"

    @property
    def graded(self) -> bool:
        return self.status == GRADED and self.result is not None

    @property
    def scores(self) -> dict[str, float]:
        """The core exercises' scores (none when not graded)."""
        if self.result is None:
            return {}
        return {name: e.score for name, e in self.result.exercises.items()}

    @property
    def bonus(self) -> dict[str, float | None]:
        """The bonus track's scores, None for an exercise not attempted."""
        if self.result is None:
            return {}
        return {name: e.score if e.attempted else None for name, e in self.result.bonus.items()}

    @property
    def total(self) -> float | None:
        return self.result.score if self.result is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {"student": self.student, "status": self.status, "kind": self.kind,
                "isolation": self.isolation,
                "result": self.result.to_dict() if self.result is not None else None}

    @classmethod
    def from_dict(cls, fields: dict[str, Any]) -> StudentRecord:
        """The record ``to_dict`` gave; KeyError, TypeError or ValueError for anything else."""
        result = fields["result"]
        record = cls(str(fields["student"]), str(fields["status"]), str(fields["kind"]),
                     SubmissionResult.from_dict(result) if result is not None else None,
                     str(fields["isolation"]))
        if record.kind not in KINDS:
            raise ValueError(f"a record of unknown kind {record.kind!r}")
        return record
