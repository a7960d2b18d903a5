"""Turning a SubmissionResult into the terminal report and Gradescope's results.json."""

from __future__ import annotations

import json
from typing import Any

from . import report_bonus
from .diagnose import feedback_line
from .engine import SubmissionResult


def to_json(result: SubmissionResult, *, include_output: bool = False) -> dict[str, Any]:
    """Gradescope's results.json: score, tests[], extra_data.exercises.<name>.

    ``include_output`` adds what the student's code printed (capped) under
    ``instructor.output``: only for files instructors alone read, never for Gradescope.
    """
    tests = []
    for exercise in result.exercises.values():
        for c in exercise.checks:
            tests.append({
                "name": f"{c.exercise}: {c.name}",
                "score": c.points,
                "max_score": c.max_points,
                "status": "passed" if c.passed else "failed",
                "output": c.feedback if not c.passed else f"Property: {c.prop}\nPassed.",
                "tags": [c.exercise],
                "visibility": c.visibility,
            })
    tests += report_bonus.tests(result)
    exercises = {
        name: {"score": e.score, "max_score": e.max_score, "misconceptions": list(e.misconceptions)}
        for name, e in result.exercises.items()
    }
    data: dict[str, Any] = {
        "score": result.score,
        "tests": tests,
        "extra_data": {
            "exercises": exercises,
            "bonus": report_bonus.summary(result),
            "answer_key_present": result.key_present,
            "hidden_points_not_graded": result.hidden_points_skipped,
        },
    }
    if include_output:
        data["instructor"] = {
            "output": {n: e.output for n, e in result.exercises.items() if e.output},
            "errors": {n: e.error for n, e in result.exercises.items() if e.error},
        }
    return data


def dump_json(result: SubmissionResult, path: str) -> None:
    with open(path, "w") as handle:
        json.dump(to_json(result), handle, indent=2, sort_keys=True)
        handle.write("\n")


def render(result: SubmissionResult, *, show_output: bool = False) -> str:
    lines = [f"Grading {result.path}", ""]
    width = max(len(n) for n in [*result.exercises, *result.bonus, "bonus total"]) + 2
    lines.append(f"{'exercise':<{width}}{'score':>9}  status")
    lines.append("-" * (width + 40))
    for name, e in result.exercises.items():
        if e.error:
            status = e.error
        elif e.not_implemented:
            status = "not implemented yet"
        else:
            failed = [c for c in e.checks if not c.passed]
            status = "all checks pass" if not failed else f"{len(failed)} check(s) failing"
        lines.append(f"{name:<{width}}{e.score:>4} / {e.max_score:<3} {status}")
    lines.append("-" * (width + 40))
    lines.append(f"{'total':<{width}}{result.score:>4} / {result.max_score}")
    if not result.key_present:
        lines.append(
            f"\n(No answer key here: graded on the public property and torch checks. "
            f"{result.hidden_points_skipped} more points come from hidden checks your "
            "instructor runs.)"
        )
    for name, e in result.exercises.items():
        failing = [c for c in e.checks if not c.passed]
        if not failing or e.not_implemented:
            continue
        lines += ["", f"== {name} =="]
        if e.error:
            lines.append(f"Not graded: {e.error}")
            continue
        # A diagnosis is shown once, above the checks (each check's JSON output carries it too).
        hints = [feedback_line(m) for m in e.misconceptions]
        lines += hints
        for c in failing:
            lines.append(f"-- {c.name} ({c.points}/{c.max_points})")
            lines += ["   " + line for line in c.feedback.splitlines() if line not in hints]
    lines += report_bonus.lines(result, width)
    if show_output:
        for name, e in [*result.exercises.items(), *result.bonus.items()]:
            if e.output.strip():
                lines += ["", f"== what {name} printed (instructor view) ==", e.output.rstrip()]
    return "\n".join(lines)
