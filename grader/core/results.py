"""What grading gives: a check's, an exercise's and a submission's result, as the engine makes
them and every output (the report, results.json, the CSV, the class report) reads them."""

from __future__ import annotations

from dataclasses import dataclass, field

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
