"""Turning a SubmissionResult into the terminal report and Gradescope's results.json (and the
instructor's ``<student>.json``: results.json with what the student's code printed).

Bonus points never enter the top-level ``score``: Gradescope's total stays the core score, and
a course that uses the bonus track reads ``extra_data.bonus``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ...core.diagnose import feedback_line
from ...core.plural import counted, noun
from ...core.records import json_name
from ...core.results import CheckResult, ExerciseResult, StudentRecord, SubmissionResult
from . import inert


def status(e: ExerciseResult) -> str:
    if e.not_implemented:  # an untouched stub: said as the student's own checks say it
        return "not implemented yet"
    if not e.attempted:
        return "not attempted"
    if e.error:
        return inert.one_line(e.error)
    failed = [c for c in e.checks if not c.passed]
    return "all checks pass" if not failed else f"{counted(len(failed), 'check')} failing"


def test_name(e: ExerciseResult, c: CheckResult) -> str:
    """A check's name in results.json and the class report: ``exercise: check``, ``bonus ``
    before a bonus exercise's."""
    return f"{'bonus ' if e.track == 'bonus' else ''}{c.exercise}: {c.name}"


def test_output(c: CheckResult) -> str:
    """What a check says in results.json (and a notebook's test cell): its feedback, or that it
    passed."""
    return inert.plain(c.feedback if not c.passed else f"Property: {c.prop}\nPassed.")


def _tests(result: SubmissionResult) -> list[dict[str, Any]]:
    """Every check an output lists (``ExerciseResult.listed``) as a Gradescope test."""
    return [{
        "name": test_name(e, c),
        "score": c.points,
        "max_score": c.max_points,
        "status": "passed" if c.passed else "failed",
        "output": test_output(c),
        "tags": [c.exercise, "bonus"] if e.track == "bonus" else [c.exercise],
        "visibility": c.visibility,
    } for e in result.results.values() for c in e.listed]


def to_json(result: SubmissionResult, *, include_output: bool = False) -> dict[str, Any]:
    """Gradescope's results.json: score, tests[], extra_data.exercises.<name> (core) and
    extra_data.bonus.<name>, each with ``attempted`` (False: its file is missing or its stub
    untouched).

    ``include_output`` adds what the student's code printed (capped) under
    ``instructor.output``: only for files instructors alone read, never for Gradescope.
    """
    exercises = {
        name: {"score": e.score, "max_score": e.max_score, "misconceptions": list(e.misconceptions),
               "attempted": e.attempted}
        for name, e in result.exercises.items()
    }
    bonus = {
        name: {"score": e.score, "max_score": e.max_score,
               "misconceptions": list(e.misconceptions), "attempted": e.attempted}
        for name, e in result.bonus.items()
    }
    data: dict[str, Any] = {
        "score": result.score,
        "tests": _tests(result),
        "extra_data": {
            "exercises": exercises,
            "bonus": bonus,
            "answer_key_present": result.key_present,
            "hidden_points_not_graded": result.hidden_points_skipped,
        },
    }
    if include_output:
        data["instructor"] = {
            "output": {n: inert.plain(e.output) for n, e in result.results.items() if e.output},
            "errors": {n: inert.plain(e.error) for n, e in result.results.items() if e.error},
        }
        if result.limits_missing:
            data["instructor"]["limits_missing"] = result.limits_missing
    return data


def failure(message: str) -> dict[str, Any]:
    """results.json for a submission that could not be graded: ``message`` says why."""
    return {"score": 0, "output": inert.plain(message), "tests": [],
            "stdout_visibility": "hidden"}


def dump_json(result: SubmissionResult, path: str | os.PathLike[str]) -> None:
    with open(path, "w") as handle:
        json.dump(to_json(result), handle, indent=2, sort_keys=True)
        handle.write("\n")


def write_instructor_json(record: StudentRecord, folder: Path) -> None:
    """``folder/<student>.json`` for a graded student: results.json with the instructor's
    part (``to_json(..., include_output=True)``); where the file's name cannot hold the
    student's (``records.json_name``), ``instructor.student`` says whose it is."""
    if record.result is None:
        return
    file, results = json_name(record.student), to_json(record.result, include_output=True)
    if file != f"{record.student}.json":
        results["instructor"]["student"] = record.student
    with open(folder / file, "w") as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
        handle.write("\n")


def _table(rows: dict[str, ExerciseResult], width: int, head: str, total: str,
           score: float, max_score: float) -> list[str]:
    lines = [f"{head:<{width}}{'score':>9}  status" + (
        " (not part of the total)" if head == "bonus" else ""), "-" * (width + 40)]
    for name, e in rows.items():
        lines.append(f"{name:<{width}}{e.score:>4} / {e.max_score:<3} {status(e)}")
    lines.append("-" * (width + 40))
    lines.append(f"{total:<{width}}{score:>4} / {max_score}")
    return lines


def _failures(name: str, e: ExerciseResult) -> list[str]:
    """A failing exercise's section: its diagnosis once, then each failing check."""
    failing = [c for c in e.checks if not c.passed]
    if not e.attempted or not failing or e.not_implemented:
        return []
    lines = ["", f"== {name}{' (bonus)' if e.track == 'bonus' else ''} =="]
    if e.error:
        return lines + [f"Not graded: {inert.one_line(e.error)}"]
    # A diagnosis is shown once, above the checks; a check it explains points back to it
    # (each check's JSON output carries the whole hint instead).
    hints = {feedback_line(m): m for m in e.misconceptions}
    lines += list(hints)
    for c in failing:
        lines.append(f"-- {c.name} ({c.points}/{c.max_points})")
        lines += ["   " + (f"Likely mistake: {hints[line]} (hint above)" if line in hints else line)
                  for line in c.feedback.splitlines()]
    return lines


def _width(result: SubmissionResult) -> int:
    return max(len(n) for n in [*result.results, "bonus total"]) + 2


def _core_table(result: SubmissionResult) -> list[str]:
    """The core exercises' table, and what the hidden checks add where they did not run."""
    lines = _table(result.exercises, _width(result), "exercise", "total", result.score,
                   result.max_score)
    if not result.key_present:
        lines.append(
            f"\n(No answer key here: graded on the public property and torch checks. "
            f"{counted(result.hidden_points_skipped, 'more point')} "
            f"{noun(result.hidden_points_skipped, 'comes', 'come')} from hidden checks your "
            "instructor runs.)"
        )
    return lines


def _bonus_table(result: SubmissionResult) -> list[str]:
    """The bonus track's table, and what the hidden checks add where they did not run."""
    lines = [""] + _table(result.bonus, _width(result), "bonus", "bonus total",
                          result.bonus_score, result.bonus_max_score)
    skipped = result.hidden_bonus_points_skipped
    if not result.key_present and skipped:
        lines.append(f"\n({counted(skipped, 'more bonus point')} "
                     f"{noun(skipped, 'comes', 'come')} from hidden checks your instructor "
                     "runs.)")
    return lines


def summary(result: SubmissionResult) -> str:
    """The report's tables without the failing checks' sections (``pytest`` ends with it): the
    table of each track it graded (``pytest -m bonus`` grades no core exercise, and shows no
    core table)."""
    lines = _core_table(result) if result.exercises or not result.bonus else []
    if result.bonus:
        lines += _bonus_table(result)[0 if lines else 1:]
    return inert.plain("\n".join(lines))


def heading(path: str) -> str:
    """The report's first line (``grade`` prints it before grading, in a terminal)."""
    return inert.plain(f"Grading {path}\n")


def render(result: SubmissionResult, *, show_output: bool = False, titled: bool = True) -> str:
    """The report; without its first line (``heading``) where that was printed before
    (``titled=False``)."""
    lines = [f"Grading {result.path}", ""] if titled else []
    lines += _core_table(result)
    for name, e in result.exercises.items():
        lines += _failures(name, e)
    if result.bonus:
        lines += _bonus_table(result)
        for name, e in result.bonus.items():
            lines += _failures(name, e)
    if show_output:
        for name, e in result.results.items():
            if e.output.strip():  # fenced: no line of it passes for one of the report's
                lines += ["", f"== what {name} printed (instructor view) ==",
                          *inert.fenced(e.output)]
    return inert.plain("\n".join(lines))  # for a terminal: no character redraws or reorders
