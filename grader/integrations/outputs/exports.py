"""Who each submission folder is, and the grades in the files a gradebook imports.

A roster is a CSV whose header holds ``folder,id,name,email`` (any order; more columns are
kept): ``folder`` is the submission folder's name, ``id`` the LMS's student id. Optional
columns the exports use when present: ``sis_user_id``, ``sis_login_id``, ``section``.

Matching a roster with the graded rows never drops anyone: a folder missing from the roster
gets a line with empty roster columns, a roster entry without a folder gets a line with status
``no submission``, and a folder (or an id) the roster lists twice keeps both lines. All three
are returned as ``issues`` and printed, so they can be fixed before the import.

Formats (checked against the importers' own documentation and code, see docs/instructors.md):

- ``grades.csv``: ``student``, the core exercises' scores, ``total``, ``status``, then the
  bonus track's scores (blank: not attempted) and ``bonus_total`` (``columns``).
- ``grades.csv`` with a roster: ``student``, the roster's columns, the exercise scores...,
  then a ``Points Possible`` row right under the header.
- Canvas: ``Student,ID,SIS User ID,SIS Login ID,Section,<assignment>``, then the
  ``Points Possible`` row as Canvas's own gradebook export writes it. A blank score leaves
  Canvas's grade as it is (not graded, no submission).
- Gradescope: ``Name,SID,Email,Total Score,Max Points,Status``: Gradescope's roster columns
  (Name, Email: its key, SID) with the score columns of its own score export.
"""

from __future__ import annotations

import csv
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.course import Course, number
from ...core.plural import counted, noun
from ...core.results import StudentRecord
from . import inert

ROSTER_COLUMNS = ("folder", "id", "name", "email")
EXPORTS = ("canvas", "gradescope")
NO_SUBMISSION = "no submission"
CANVAS_STUDENT_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS_POSSIBLE = "    Points Possible"  # Canvas's export indents it; its importer looks
#                                                 for the words anywhere in the first cell
POINTS_POSSIBLE = re.compile(r"(points)\s*(possible)", re.IGNORECASE)
GRADESCOPE_COLUMNS = ("Name", "SID", "Email", "Total Score", "Max Points", "Status")


class RosterError(ValueError):
    """A roster that cannot be read: the message says which file and what is wrong."""


@dataclass
class Roster:
    columns: list[str]  # every header column, in the file's order
    entries: list[dict[str, str]]  # one per data row, in the file's order


def load_roster(path: str | os.PathLike[str]) -> Roster:
    """Read a roster CSV (UTF-8, an Excel byte-order mark allowed); cells are stripped."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            header = [cell.strip() for cell in next(reader, [])]
            lines = [row for row in reader if any(cell.strip() for cell in row)]
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise RosterError(f"cannot read the roster {path}: {error}") from None
    missing = [c for c in ROSTER_COLUMNS if c not in header]
    if missing:
        raise RosterError(f"the roster {path} has no {', '.join(missing)} "
                          f"{noun(len(missing), 'column')} (its header "
                          f"must hold {','.join(ROSTER_COLUMNS)}; other columns are kept)")
    repeated = sorted(c for c, n in Counter(header).items() if n > 1)
    if repeated:
        raise RosterError(f"the roster {path} repeats the {noun(len(repeated), 'column')} "
                          f"{', '.join(repeated)}")
    entries = []
    for number_, row in enumerate(lines, start=2):
        if len(row) > len(header):
            raise RosterError(f"the roster {path}, data row {number_}: {counted(len(row), 'cell')} "
                              f"for {counted(len(header), 'column')}")
        cells = [cell.strip() for cell in row] + [""] * (len(header) - len(row))
        entries.append(dict(zip(header, cells)))
    return Roster(header, entries)


@dataclass
class Match:
    """The gradebook's lines: (roster entry or None, graded row or None), sorted by folder."""

    lines: list[tuple[dict[str, str] | None, StudentRecord | None]]
    extra_columns: list[str]  # the roster's columns beyond folder,id,name,email
    issues: dict[str, Any] = field(default_factory=dict)


def match(roster: Roster, rows: list[StudentRecord]) -> Match:
    by_folder: dict[str, list[dict[str, str]]] = {}
    for entry in roster.entries:
        by_folder.setdefault(entry["folder"], []).append(entry)
    graded = {row.student: row for row in rows}
    lines: list[tuple[dict[str, str] | None, StudentRecord | None]] = []
    for row in rows:
        lines += [(entry, row) for entry in by_folder.get(row.student, [])] or [(None, row)]
    lines += [(entry, None) for entry in roster.entries if entry["folder"] not in graded]
    lines.sort(key=_folder)
    ids: dict[str, list[str]] = {}
    for entry in roster.entries:
        if entry["id"]:
            ids.setdefault(entry["id"], []).append(entry["folder"])
    issues = {
        "not_in_roster": [row.student for row in rows if row.student not in by_folder],
        "no_submission": [_who(entry) for entry in roster.entries
                          if entry["folder"] not in graded],
        "duplicate_folders": {folder: [e["id"] for e in entries]
                              for folder, entries in sorted(by_folder.items())
                              if len(entries) > 1},
        "duplicate_ids": {i: folders for i, folders in sorted(ids.items()) if len(folders) > 1},
    }
    extra = [c for c in roster.columns if c not in ROSTER_COLUMNS]
    return Match(lines, extra, issues)


def _folder(line: tuple[dict[str, str] | None, StudentRecord | None]) -> str:
    entry, row = line
    return row.student if row is not None else (entry or {}).get("folder", "")


def _who(entry: dict[str, str]) -> str:
    name = entry["name"] or entry["email"] or entry["id"] or "(no name)"
    return f"{entry['folder']} ({name})" if entry["folder"] else f"(no folder) {name}"


def issue_lines(issues: dict[str, Any]) -> list[str]:
    """The roster's problems, one sentence each (empty when there are none)."""
    lines = []
    if issues.get("not_in_roster"):
        lines.append(f"{counted(len(issues['not_in_roster']), 'submission folder')} not in the "
                     "roster "
                     f"(exported without an id): {', '.join(issues['not_in_roster'])}")
    if issues.get("no_submission"):
        lines.append(f"{counted(len(issues['no_submission']), 'roster entry', 'roster entries')}"
                     " without a submission "
                     f"(exported with a blank score): {', '.join(issues['no_submission'])}")
    for folder, ids in issues.get("duplicate_folders", {}).items():
        lines.append(f"the roster lists folder {folder} {len(ids)} times (ids "
                     f"{', '.join(ids) or '(none)'}): each line carries its grade")
    for student_id, folders in issues.get("duplicate_ids", {}).items():
        lines.append(f"the roster gives id {student_id} to {len(folders)} folders "
                     f"({', '.join(folders)}): the gradebook will see that student twice")
    return lines


# -- writing ----------------------------------------------------------------------------------
def columns(course: Course) -> tuple[str, ...]:
    """student, the core exercises, total, status, then the bonus track and its total."""
    return ("student", *course.names("core"), "total", "status", *course.names("bonus"),
            "bonus_total")


def cells(record: StudentRecord, course: Course) -> list[str]:
    """A student's line of ``grades.csv``, in ``columns`` order: scores only when graded."""
    graded = record.status == "graded"
    scores, bonus = record.scores, [record.bonus.get(n) for n in course.names("bonus")]
    status = (f"{record.status} (isolation: {record.isolation})" if record.isolation
              else record.status)
    return [record.student,
            *(str(scores[n]) if graded else "" for n in course.names("core")),
            str(record.total) if graded else "", status,
            *("" if b is None else str(b) for b in bonus),
            str(number(sum(b for b in bonus if b is not None))) if graded else ""]


def write_grades(rows: list[StudentRecord], path: str | os.PathLike[str],
                 course: Course) -> None:
    """``grades.csv`` without a roster: a line per student, in ``rows``' order."""
    handle, writer = _writer(path)
    with handle:
        writer.writerow(columns(course))
        for row in rows:
            writer.writerow(cells(row, course))


class _Guarded:
    """A CSV writer whose every cell goes through the kit's one formula guard."""

    def __init__(self, handle: Any):
        self.writer = csv.writer(handle, lineterminator="\n")

    def writerow(self, cells: list[Any]) -> None:
        self.writer.writerow(inert.csv_row(cells))


def _writer(path: str | os.PathLike[str]):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "w", newline="", encoding="utf-8")
    return handle, _Guarded(handle)


def points_possible(course: Course) -> list[str]:
    """The CSV's score columns' maxima, in ``columns`` order (status left blank)."""
    core = [str(number(course.points(n))) for n in course.names("core")]
    bonus = [str(number(course.points(n))) for n in course.names("bonus")]
    return [*core, str(number(course.total("core"))), "", *bonus,
            str(number(sum(course.points(n) for n in course.names("bonus"))))]


def write_csv(found: Match, path: str | os.PathLike[str], course: Course) -> None:
    """``grades.csv`` with the roster's columns after ``student`` and a Points Possible row."""
    head = ["id", "name", "email", *found.extra_columns]
    score_columns = list(columns(course)[1:])
    handle, writer = _writer(path)
    with handle:
        writer.writerow(["student", *head, *score_columns])
        writer.writerow(["Points Possible", *[""] * len(head), *points_possible(course)])
        for entry, row in found.lines:
            folder = _folder((entry, row))
            line = cells(row, course)[1:] if row else [
                NO_SUBMISSION if c == "status" else "" for c in score_columns]
            writer.writerow([folder, *((entry or {}).get(c, "") for c in head), *line])


def write_canvas(found: Match, path: str | os.PathLike[str], course: Course,
                 assignment: str) -> None:
    """Canvas's gradebook import: one assignment column holding the core total."""
    handle, writer = _writer(path)
    with handle:
        writer.writerow([*CANVAS_STUDENT_COLUMNS, assignment])
        writer.writerow([CANVAS_POINTS_POSSIBLE, "", "", "", "", str(number(course.total()))])
        for entry, row in found.lines:
            entry = entry or {}
            name = not_points_possible(entry.get("name") or (row.student if row else ""))
            writer.writerow([name, entry.get("id", ""), entry.get("sis_user_id", ""),
                             entry.get("sis_login_id", ""), entry.get("section", ""),
                             _score(row)])


def not_points_possible(name: str) -> str:
    """A student's name that Canvas's importer cannot take for its Points Possible row (it
    looks for those words anywhere in a line's first cell, and the last such line sets the
    assignment's points): the words get an underscore between them."""
    return POINTS_POSSIBLE.sub(lambda m: f"{m[1]}_{m[2]}", name)


def write_gradescope(found: Match, path: str | os.PathLike[str], course: Course) -> None:
    """Gradescope's roster-score CSV: matched on Email, the core total out of Max Points."""
    handle, writer = _writer(path)
    with handle:
        writer.writerow(GRADESCOPE_COLUMNS)
        for entry, row in found.lines:
            entry = entry or {}
            status = "Missing" if row is None else (
                "Graded" if row.status == "graded" else "Ungraded")
            writer.writerow([entry.get("name") or (row.student if row else ""),
                             entry.get("id", ""), entry.get("email", ""), _score(row),
                             str(number(course.total())), status])


def _score(row: StudentRecord | None) -> str:
    return str(row.total) if row is not None and row.status == "graded" else ""


def write_export(kind: str, found: Match, path: str | os.PathLike[str], course: Course,
                 assignment: str) -> None:
    if kind == "canvas":
        write_canvas(found, path, course, assignment)
    elif kind == "gradescope":
        write_gradescope(found, path, course)
    else:
        raise ValueError(f"unknown export {kind!r} (choose from {', '.join(EXPORTS)})")


def load_for(exports: list[tuple[str, str]] | None, roster_path: str | None) -> Roster | None:
    """Check the requested exports and read the roster, before any grading starts."""
    for kind, _ in exports or []:
        if kind not in EXPORTS:
            raise RosterError(f"unknown export {kind!r} (choose from {', '.join(EXPORTS)})")
    if exports and not roster_path:
        raise RosterError("--export needs --roster: a gradebook matches students by id or "
                          "email, which the roster gives")
    return load_roster(roster_path) if roster_path else None
