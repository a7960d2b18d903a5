"""The bonus track in the reports: its own terminal section and its own results.json keys.

Bonus points never enter the top-level ``score``: Gradescope's total stays the core score, and
a course that uses the bonus reads ``extra_data.bonus``.
"""

from __future__ import annotations

from typing import Any

from .engine import ExerciseResult, SubmissionResult


def status(e: ExerciseResult) -> str:
    if not e.attempted:
        return "not attempted"
    if e.error:
        return e.error
    if e.not_implemented:
        return "not implemented yet"
    failed = [c for c in e.checks if not c.passed]
    return "all checks pass" if not failed else f"{len(failed)} check(s) failing"


def tests(result: SubmissionResult) -> list[dict[str, Any]]:
    """Gradescope tests for the attempted bonus exercises, tagged with the exercise and "bonus"."""
    out = []
    for e in result.bonus.values():
        for c in e.checks:
            out.append({
                "name": f"bonus {c.exercise}: {c.name}",
                "score": c.points,
                "max_score": c.max_points,
                "status": "passed" if c.passed else "failed",
                "output": c.feedback if not c.passed else f"Property: {c.prop}\nPassed.",
                "tags": [c.exercise, "bonus"],
                "visibility": c.visibility,
            })
    return out


def summary(result: SubmissionResult) -> dict[str, Any]:
    """``extra_data.bonus``: one entry per bonus exercise, attempted or not."""
    return {
        name: {"score": e.score, "max_score": e.max_score,
               "misconceptions": list(e.misconceptions), "attempted": e.attempted}
        for name, e in result.bonus.items()
    }


def lines(result: SubmissionResult, width: int) -> list[str]:
    """The terminal table's bonus section, then the failing bonus checks' feedback."""
    if not result.bonus:
        return []
    out = ["", f"{'bonus':<{width}}{'score':>9}  status (not part of the total)",
           "-" * (width + 40)]
    for name, e in result.bonus.items():
        out.append(f"{name:<{width}}{e.score:>4} / {e.max_score:<3} {status(e)}")
    out.append("-" * (width + 40))
    out.append(f"{'bonus total':<{width}}{result.bonus_score:>4} / {result.bonus_max_score}")
    for name, e in result.bonus.items():
        failing = [c for c in e.checks if not c.passed]
        if not e.attempted or not failing or e.not_implemented:
            continue
        out += ["", f"== {name} (bonus) =="]
        if e.misconceptions:
            out.append(f"Likely misconception: {', '.join(e.misconceptions)}")
        if e.error:
            out.append(f"Not graded: {e.error}")
            continue
        for c in failing:
            out.append(f"-- {c.name} ({c.points}/{c.max_points})")
            out += ["   " + line for line in c.feedback.splitlines()]
    return out
