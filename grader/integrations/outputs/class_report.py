"""What the class got wrong: ``summary.json``, ``summary.md`` and ``index.html`` from a batch.

``python -m grader batch DIR --csv grades.csv --report OUT`` builds it from the records just
graded; ``python -m grader report JSON_DIR [--csv grades.csv] --out OUT`` from the records an
earlier ``--json-dir`` kept (``grader.core.records``; the CSV adds any student it lists who has
no record there).

``summary.json`` holds ``class`` (counts), ``total`` and ``exercises.<name>`` (mean, median,
min, max and a histogram of the scores of the students graded, and ``not_attempted``: who left
its stub untouched, or its bonus file out), ``checks.<test name>`` (pass rate and who failed,
among the students who attempted its exercise), ``misconceptions.<id>`` (count, students,
exercises, hint: most common first), ``statuses.<key>`` (count, students), ``not_graded``
(student -> why) and, with a roster, ``roster`` (its problems); with the submissions' files,
``similarity`` (the pairs of files flagged as alike: ``grader.integrations.outputs.similarity``).
Everything is a function of the records (``StudentRecord``, typed: nothing here reads back a
text the kit wrote) and files: no dates, no timings, fixed orders, so a rerun writes identical
bytes.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import statistics
import sys
from pathlib import Path
from typing import Any, TextIO

from ...core import records
from ...core.course import Course, number
from ...core.plural import counted
from ...core.results import KINDS, StudentRecord
from . import inert, similarity_report
from . import similarity as alike
from .class_page import lowest_checks, render
from .report import test_name

# -- statuses ---------------------------------------------------------------------------------
_REASONS = (  # (pattern in a lowercased "not graded: ..." detail, key), first match wins
    (r"time limit|timed out|timeout", "timeout"),
    (r"killed by signal|exited with code|grader error|crash", "crashed"),
    (r"out of memory|memory", "out of memory"),
    (r"empty", "empty"),
    (r"not a folder", "not a folder"),
    (r"more than .*mib|too (big|large)", "too large"),
    (r"^ *no result \(", "no result"),  # merge: a shard that died or never ran
)


def status_key(status: str) -> str:
    """A short, stable key for a status read from a CSV (``report --csv``'s students without a
    record; a record carries its own ``kind``): ``graded``, ``timeout``, ``crashed``...

    ``not graded: <why>`` is keyed by what the reason says; any other status by its first word
    group (``empty``, ``timeout: 60 s`` -> ``timeout``), so statuses added later get keys too.
    """
    text = status.strip()
    lowered = text.lower()
    if lowered.startswith("not graded"):
        detail = lowered.partition(":")[2]
        return next((key for pattern, key in _REASONS if re.search(pattern, detail)),
                    "not graded")
    return lowered.partition(":")[0].strip() or "unknown"


# -- reading earlier results ------------------------------------------------------------------
def load_rows(json_dir: str | os.PathLike[str],
              csv_path: str | os.PathLike[str] | None = None) -> list[StudentRecord]:
    """The records an earlier ``--json-dir`` kept (``grader.core.records``), plus the CSV's
    students without one (sorted). ValueError for a folder that keeps no records."""
    folder = Path(json_dir)
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder of <student>.json files")
    if not records.present(folder) and any(folder.glob("*.json")):
        raise ValueError(f"{folder} keeps no records ({records.FOLDER}/): it was not written "
                         "by batch --json-dir of this kit (a kit before 2026-12 kept none); "
                         "grade the class again with batch --json-dir")
    rows = {student: record for student, (record, _) in records.read(folder).items()}
    for line in _batch_csv(csv_path) if csv_path is not None else []:
        line = {k: inert.csv_text(v or "") for k, v in line.items()}
        student = line.get("student", "")
        if student in rows or not student or (  # the kit's own row: no status
                student == "Points Possible" and not line.get("status")):
            continue
        status = line.get("status") or "unknown"
        if status == "graded":  # graded, but its record is not in json_dir
            status = f"not graded: no record of {student} in {folder.name}"
        if status != "no submission":  # a roster entry, not a submission (--roster's)
            key = status_key(status)
            rows[student] = StudentRecord(student, status, key if key in KINDS else "not graded")
    return [rows[name] for name in sorted(rows)]


def _batch_csv(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    """The lines of the CSV ``batch --csv`` wrote (``report --csv`` reads it: report writes no
    CSV). ValueError, saying so, for a file that is not there or is not that CSV."""
    what = (f"--csv {path}: report reads the CSV that batch --csv wrote, to add its students "
            "without a JSON (report writes index.html, summary.json and summary.md into --out, "
            "and no CSV)")
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            lines = list(reader)
    except FileNotFoundError:
        raise ValueError(f"{what}; there is no such file") from None
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        why = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise ValueError(f"{what}; it cannot be read ({why})") from None
    if not {"student", "status"} <= set(reader.fieldnames or []):
        raise ValueError(f"{what}; this one has no student and status columns")
    return lines


# -- the summary ------------------------------------------------------------------------------
def histogram(scores: list[float], possible: float) -> list[dict[str, float]]:
    """Counts per bin: ``low <= score < high``, a width of 1, 2, 5, 10... points (at most 25
    bins), and a last bin ``low == high == possible`` for full marks alone."""
    if possible <= 0:
        return [{"low": 0, "high": 0, "count": len(scores)}]
    width = next(w for w in (1, 2, 5, 10, 20, 50, 100, 1000, math.inf)
                 if possible / w <= 25)
    if width == math.inf:  # a very large maximum: ten equal bins
        width = possible / 10
    bins = math.ceil(possible / width - 1e-9)
    counts = [0] * (bins + 1)
    for score in scores:
        counts[bins if score >= possible else min(int(max(score, 0) // width), bins - 1)] += 1
    edges = [number(min(i * width, possible)) for i in range(bins + 1)] + [number(possible)]
    return [{"low": edges[i], "high": edges[i + 1], "count": counts[i]}
            for i in range(bins + 1)]


def _distribution(scores: list[float], possible: float) -> dict[str, Any]:
    stats: dict[str, Any] = {"points_possible": number(possible), "graded": len(scores)}
    if scores:
        stats |= {"mean": number(statistics.fmean(scores)),
                  "median": number(statistics.median(scores)),
                  "min": number(min(scores)), "max": number(max(scores)),
                  "full_marks": sum(s >= possible for s in scores)}
    return stats | {"histogram": histogram(scores, possible)}


def _names(course: Course, rows: list[StudentRecord], track: str) -> list[str]:
    """The course's exercises of ``track``, then any other the results hold (another course)."""
    names = list(course.names(track))
    for row in rows:
        names += [n for n in (row.scores if track == "core" else row.bonus) if n not in names]
    return names


def _points(course: Course, name: str, rows: list[StudentRecord]) -> float:
    try:
        return course.points(name)
    except (KeyError, ValueError):  # not in this course: the results say what it was out of
        for row in rows:
            if row.result is not None and name in row.result.results:
                return row.result.results[name].max_score
        return 0


def summarize(rows: list[StudentRecord], course: Course, *, hints: dict[str, str] | None = None,
              roster_issues: dict[str, Any] | None = None) -> dict[str, Any]:
    """The class summary (see the module docstring) of ``rows`` sorted by student."""
    graded = [r for r in rows if r.graded]
    core, bonus = _names(course, rows, "core"), _names(course, rows, "bonus")
    exercises: dict[str, Any] = {}
    for name in core:
        exercises[name] = {"track": "core", **_distribution(
            [r.scores[name] for r in graded if name in r.scores], _points(course, name, rows))}
    for name in bonus:
        exercises[name] = {"track": "bonus", **_distribution(
            [r.bonus[name] for r in graded if r.bonus.get(name) is not None],  # type: ignore[misc]
            _points(course, name, rows))}
    for name, entry in exercises.items():
        entry["not_attempted"] = [r.student for r in graded
                                  if not _attempted(r, name, entry["track"] == "bonus")]
        entry["errors"] = {r.student: inert.plain(r.result.results[name].error)
                           for r in graded if r.result is not None and name in r.result.results
                           and r.result.results[name].error}
    statuses: dict[str, list[str]] = {}
    for row in rows:
        statuses.setdefault(row.kind, []).append(row.student)
    if roster_issues and roster_issues.get("no_submission"):  # on the roster, no folder
        from .exports import NO_SUBMISSION

        statuses.setdefault(NO_SUBMISSION, []).extend(roster_issues["no_submission"])
    summary: dict[str, Any] = {
        "class": {"students": len(rows), "graded": len(graded),
                  "points_possible": number(course.total("core")),
                  "core": core, "bonus": bonus},
        "total": _distribution([r.total for r in graded if r.total is not None],
                               course.total("core")),
        "exercises": exercises,
        "checks": _checks(graded),
        "misconceptions": _misconceptions(graded, hints or {}),
        "statuses": {key: {"count": len(who), "students": who} for key, who in
                     sorted(statuses.items(), key=lambda kv: (kv[0] != "graded", -len(kv[1]),
                                                               kv[0]))},
        "not_graded": {r.student: r.status for r in rows if r.status != "graded"},
    }
    missing = sorted({limit for r in graded if r.result is not None
                      for limit in r.result.limits_missing})
    if missing:  # graded where workers could not get cgroups of their own
        summary["limits_missing"] = missing
    if roster_issues is not None:
        summary["roster"] = roster_issues
    return summary


def _attempted(row: StudentRecord, exercise: str, bonus: bool) -> bool:
    """Whether the student started ``exercise``: a bonus one's file is there and not the
    untouched stub; a core one is not the untouched stub (its results say ``attempted``)."""
    if bonus:
        return row.bonus.get(exercise) is not None
    result = row.result.exercises.get(exercise) if row.result is not None else None
    return result is None or result.attempted


def _checks(graded: list[StudentRecord]) -> dict[str, Any]:
    """Per check (results.json test name): how many took it, passed, the rate, who failed.
    A check counts only the students who attempted its exercise: an untouched stub (or a
    missing bonus file) says nothing of what the check asks, and would fill the lowest pass
    rates with exercises left undone; a core one still scores 0, in the exercise's scores."""
    checks: dict[str, Any] = {}
    for row in graded:
        assert row.result is not None
        for e in row.result.results.values():
            if not _attempted(row, e.name, e.track == "bonus"):
                continue
            for c in e.listed:
                entry = checks.setdefault(test_name(e, c), {
                    "exercise": c.exercise, "track": e.track, "visibility": c.visibility,
                    "points_possible": c.max_points,
                    "students": 0, "passed": 0, "failed_students": []})
                entry["students"] += 1
                if c.passed:
                    entry["passed"] += 1
                else:
                    entry["failed_students"].append(row.student)
    for entry in checks.values():
        entry["pass_rate"] = round(entry["passed"] / entry["students"], 4)
    return checks


def _misconceptions(graded: list[StudentRecord], hints: dict[str, str]) -> dict[str, Any]:
    found: dict[str, dict[str, Any]] = {}
    for row in graded:
        assert row.result is not None
        parts = [*row.result.exercises.items(), *row.result.bonus.items()]
        for name, e in parts:
            if not _attempted(row, name, e.track == "bonus"):
                continue
            for mid in e.misconceptions:
                item = found.setdefault(mid, {"students": [], "exercises": {}})
                if row.student not in item["students"]:
                    item["students"].append(row.student)
                item["exercises"][name] = item["exercises"].get(name, 0) + 1
    ranked = sorted(found.items(), key=lambda kv: (-len(kv[1]["students"]), kv[0]))
    return {mid: {"count": len(item["students"]), "students": item["students"],
                  "exercises": item["exercises"],
                  "hint": hints.get(mid, "(not in this kit's catalog of misconceptions)")}
            for mid, item in ranked}


def catalog_hints() -> dict[str, str]:
    """Every misconception's hint, by id (imports the exercises)."""
    from ...core.diagnose import catalog

    return {mid: m.hint for mid, m in catalog().items()}


# -- summary.md -------------------------------------------------------------------------------
def _cell(value: Any) -> str:
    return inert.markdown(value)  # names, statuses, errors: the students' text, shown as text


def _table(head: list[str], lines: list[list[Any]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|",
            *("| " + " | ".join(_cell(c) for c in line) + " |" for line in lines)]


def _few(names: list[str], limit: int = 6) -> str:
    more = len(names) - limit
    return ", ".join(names[:limit]) + (f" and {more} more" if more > 0 else "")


def markdown(summary: dict[str, Any]) -> str:
    """The summary in a few tables, for a terminal or an email."""
    klass, total = summary["class"], summary["total"]
    lines = ["# Class report", "",
             f"{counted(klass['students'], 'submission')}, {klass['graded']} graded. "
             "Total out of "
             f"{klass['points_possible']}: mean {total.get('mean', '-')}, median "
             f"{total.get('median', '-')}.", ""]
    if summary.get("limits_missing"):
        lines += ["Graded without per-worker cgroups, so these limits were missing:", "",
                  *(f"- {inert.markdown(m)}" for m in summary["limits_missing"]), ""]
    lines += ["## Statuses", ""]
    lines += _table(["status", "students", "who"], [
        [key, s["count"], "" if key == "graded" else _few(s["students"])]
        for key, s in summary["statuses"].items()])
    lines += ["", "## Scores per exercise", ""]
    lines += _table(["exercise", "track", "points", "graded", "mean", "median", "full marks",
                     "not attempted", "not graded"], [
        [name, e["track"], e["points_possible"], e["graded"], e.get("mean", "-"),
         e.get("median", "-"), e.get("full_marks", "-"), len(e.get("not_attempted", [])),
         len(e["errors"])]
        for name, e in summary["exercises"].items()])
    lines += ["", "## Most common misconceptions", ""]
    lines += _table(["misconception", "students", "exercises", "hint"], [
        [mid, m["count"], ", ".join(m["exercises"]), m["hint"]]
        for mid, m in summary["misconceptions"].items()]) if summary["misconceptions"] else [
        "None diagnosed."]
    lines += ["", "## Checks with the lowest pass rates", ""]
    worst = lowest_checks(summary)
    lines += _table(["check", "passed", "pass rate", "failed by"], [
        [name, f"{c['passed']}/{c['students']}", f"{100 * c['pass_rate']:.0f}%",
         _few(c["failed_students"], 4)] for name, c in worst]) if worst else [
        "Every check passed for every student."]
    if "similarity" in summary:
        lines += similarity_report.markdown_lines(summary["similarity"])
    errors = [(n, s, why) for n, e in summary["exercises"].items()
              for s, why in e["errors"].items()]
    if errors:  # as index.html has them
        lines += ["", "## Exercises that could not be graded", ""]
        lines += _table(["exercise", "student", "why"], [list(e) for e in errors])
    if summary["not_graded"]:
        lines += ["", "## Not graded", ""]
        lines += _table(["student", "status"], [[s, why] for s, why in
                                                 summary["not_graded"].items()])
    if summary.get("roster"):
        from .exports import issue_lines

        problems = issue_lines(summary["roster"])
        lines += ["", "## Roster", ""] + ([f"- {inert.markdown(p)}" for p in problems] or [
            "Every submission folder is in the roster, once, and every entry submitted."])
    return inert.plain("\n".join(lines) + "\n")  # every student text is a cell, and then this


# -- writing ----------------------------------------------------------------------------------
def write(summary: dict[str, Any], out: str | os.PathLike[str], *,
          pages: dict[str, str] | None = None) -> list[Path]:
    """Write ``summary.json``, ``summary.md`` and ``index.html`` into ``out``, and ``pages``
    (path in ``out`` -> HTML: the similar pairs side by side)."""
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    files = {"summary.json": json.dumps(summary, indent=2, ensure_ascii=False) + "\n",
             "summary.md": markdown(summary), "index.html": render(summary)}
    for name, text in files.items():  # what no UTF-8 file can hold is escaped, not a crash
        (target / name).write_text(text, encoding="utf-8", errors="backslashreplace")
    for name, text in (pages or {}).items():
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        (target / name).write_text(text, encoding="utf-8", errors="backslashreplace")
    return [target / name for name in files]


def build(rows: list[StudentRecord], course: Course, out: str | os.PathLike[str], *,
          roster_issues: dict[str, Any] | None = None,
          similar: alike.Similarity | None = None) -> list[Path]:
    """Summarize ``rows`` (hints from the kit's catalog) and write the three files, with the
    similar pairs and their pages when ``similar`` (``similarity.compare``) is given."""
    summary = summarize(rows, course, hints=catalog_hints(), roster_issues=roster_issues)
    if similar is not None:
        summary["similarity"] = similar.summary
    return write(summary, out, pages=similar.pages if similar is not None else None)


def finish(rows: list[StudentRecord], course: Course, *, report_dir: str | None = None,
           roster: Any = None, csv_path: str | None = None,
           exports: list[tuple[str, str]] | None = None, assignment: str = "attention",
           similar: alike.Similarity | None = None, stream: TextIO = sys.stderr) -> None:
    """After grading (or reading earlier results): match the roster (its problems printed),
    write the roster-aware CSV, the gradebook exports and the report, each named on stderr."""
    from . import exports as gradebook

    found = gradebook.match(roster, rows) if roster is not None else None
    if found is not None:
        for line in gradebook.issue_lines(found.issues):
            print(inert.plain(f"roster: {line}"), file=stream)
        if csv_path:
            gradebook.write_csv(found, csv_path, course)
        for kind, path in exports or []:
            gradebook.write_export(kind, found, path, course, assignment)
            print(f"wrote {path} ({kind} gradebook import)", file=stream)
    if report_dir:
        written = build(rows, course, report_dir,
                        roster_issues=found.issues if found is not None else None,
                        similar=similar)
        print(f"wrote {', '.join(str(p) for p in written)}", file=stream)
