"""Recording isolated grading results in nbgrader's gradebook, as ``nbgrader autograde`` does.

``read_layout`` reads what ``nbgrader generate_assignment`` put in the gradebook (the notebook,
its answer cells, its test cells and their points); ``record`` writes one student's result
through nbgrader's own code: the submission (with its ``timestamp.txt``), the notebook as
nbgrader's sanitizing preprocessors leave it (ClearOutput, DeduplicateIds, OverwriteKernelspec,
OverwriteCells, CheckCellMetadata), with the kit's feedback and points as each test cell's
outputs, then the grades and comments nbgrader's SaveAutoGrades and AssignLatePenalties derive
from those outputs, and the notebook in ``autograded/``. ``nbgrader export``, formgrader and
``nbgrader generate_feedback`` then read it as their own.
"""

from __future__ import annotations

import dataclasses
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.course import COURSE_ENV, Course, number
from ...core.plural import counted
from ...core.results import ExerciseResult, SubmissionResult
from ..outputs import inert
from ..outputs.report import test_output
from . import kernel
from . import notebook as nbfile

HIDDEN_SUFFIX, VISIBLE_SUFFIX = "_hidden_tests", "_tests"
DELETED = "its answer cell is not in the submitted notebook"


class AutogradeError(Exception):
    """The course cannot be autograded as it stands; the message says what to do."""


@dataclass
class Layout:
    """What the gradebook holds about the assignment's notebook (from generate_assignment)."""

    notebook: str  # its name: students submit <notebook>.ipynb
    answers: list[str]  # the answer cells' grade ids: the exercises
    tests: dict[str, tuple[str, bool, float]]  # test cell -> (exercise, hidden, max score)
    course_file: Path | None  # the course the notebook was built with (its setup cell)


@dataclass
class Submission:
    student: str
    folder: Path  # submitted/<student>/<assignment>
    status: str = "graded"
    text: str | None = None  # the notebook file, when it is one
    timestamp: bytes | None = None  # its timestamp.txt, as the copy read it
    found: nbfile.Answers | None = None
    deleted: list[str] = field(default_factory=list)
    result: SubmissionResult | None = None  # what the batch grader gave it
    score: float | None = None
    max_score: float | None = None


# -- the gradebook's side of the assignment -----------------------------------------------
def read_layout(gradebook: Any, assignment: str) -> Layout:
    """The assignment's notebook as ``nbgrader generate_assignment`` recorded it; its test
    cells are ``<exercise>_tests`` and ``<exercise>_hidden_tests`` (``notebook.notebook``)."""
    from nbgrader.api import MissingEntry

    try:
        notebooks = gradebook.find_assignment(assignment).notebooks
    except MissingEntry:
        raise AutogradeError(f"the gradebook has no assignment {assignment!r}: run `nbgrader "
                             f"generate_assignment {assignment}` first") from None
    if len(notebooks) != 1:
        raise AutogradeError(f"assignment {assignment!r} has {len(notebooks)} notebooks; the "
                             "kit's assignments have one")
    nb = notebooks[0]
    tests = {}
    for cell in nb.grade_cells:
        hidden = cell.name.endswith(HIDDEN_SUFFIX)
        exercise = cell.name.removesuffix(HIDDEN_SUFFIX if hidden else VISIBLE_SUFFIX)
        tests[cell.name] = (exercise, hidden, float(cell.max_score))
    setup = "\n".join(c.source or "" for c in nb.source_cells if c.name == "setup")
    match = re.search(rf"^%env {COURSE_ENV}=(.+)$", setup, re.MULTILINE)
    return Layout(nb.name, sorted(c.name for c in nb.solution_cells), tests,
                  Path(match.group(1).strip()) if match else None)


def check_course(layout: Layout, course: Course) -> None:
    """The test cells must be worth what the course gives their checks, or grades would not
    add up: the notebook was built with another course file."""
    for name in layout.answers:
        if name not in course.names():
            raise AutogradeError(f"answer cell {name!r} is not an enabled exercise of "
                                 f"{course.path}: pass the course file the notebook was built "
                                 "with (--course-file)")
    for cell, (exercise, hidden, max_score) in layout.tests.items():
        if exercise not in course.names():
            raise AutogradeError(f"test cell {cell!r} belongs to no exercise of the course")
        spec = next(e for e in course.exercises() if e.name == exercise)
        points = course.check_points(spec)
        wanted = number(sum(points[c.name] for c in spec.checks if c.hidden == hidden))
        if abs(wanted - max_score) > 1e-9:
            raise AutogradeError(
                f"test cell {cell!r} is worth {counted(number(max_score), 'point')} in the "
                "gradebook and "
                f"{wanted} in {course.path}: autograde with the course file the notebook was "
                "built with (--course-file), or rebuild and regenerate the assignment")


# -- the test cells' outputs -----------------------------------------------------------------
def cell_outputs(sub: Submission, exercise: str, hidden: bool) -> list[dict[str, Any]]:
    """A test cell's outputs, as running ``score(exercise, hidden=...)`` in the kernel prints
    them: the feedback, then the points (nbgrader's partial credit); an error if not graded."""
    if sub.result is None:
        status = inert.plain(sub.status)
        return [{"output_type": "error", "ename": "NotGraded", "evalue": status,
                 "traceback": [f"{exercise}: {status}"]}]
    found = sub.result.results.get(exercise)
    # the checks results.json lists (none for a bonus exercise not attempted), as passed or not
    graded = dataclasses.replace(found, checks=[
        dataclasses.replace(c, feedback=test_output(c)) for c in found.listed]) if (
        found is not None and found.listed) else ExerciseResult(exercise, 0)
    if exercise in sub.deleted:
        graded.error = DELETED
    checks = [c for c in graded.checks if c.hidden == hidden]
    points = 0 if graded.error else number(sum(c.points for c in checks))
    text = inert.plain(kernel.feedback_text(exercise, graded, checks, points))
    return [
        {"output_type": "stream", "name": "stdout", "text": text + "\n"},
        {"output_type": "execute_result", "execution_count": None, "metadata": {},
         "data": {"text/plain": repr(points)}},
    ]


# -- recording, as nbgrader autograde does ----------------------------------------------------
def _timestamp(sub: Submission) -> Any:
    """The submission's time as nbgrader's ``get_existing_timestamp`` reads it, from the
    ``timestamp.txt`` the copy read (nbgrader's would follow a link, or wait on a pipe)."""
    from nbgrader.utils import parse_utc

    try:
        text = (sub.timestamp or b"").decode().strip()
        return parse_utc(text) if text else None
    except Exception:  # an unreadable timestamp.txt: the submission counts as on time
        return None


def _sanitized(nb: Any, config: Any, resources: dict[str, Any]) -> Any:
    from nbgrader.preprocessors import (
        CheckCellMetadata,
        ClearOutput,
        DeduplicateIds,
        OverwriteCells,
        OverwriteKernelspec,
    )

    for step in (ClearOutput(config=config), DeduplicateIds(config=config)):
        nb, resources = step.preprocess(nb, resources)
    for cell in nb.cells:
        # DeduplicateIds leaves the extra copies an empty "nbgrader" entry, which
        # CheckCellMetadata then rejects as an outdated schema, stopping nbgrader's whole
        # autograde: make them plain cells instead.
        if cell.metadata.get("nbgrader") == {}:
            del cell.metadata["nbgrader"]
    for step in (OverwriteKernelspec(config=config), OverwriteCells(config=config),
                 CheckCellMetadata(config=config)):
        nb, resources = step.preprocess(nb, resources)
    return nb


class _TestCellsDeleted(Exception):
    pass


def _submitted_notebook(sub: Submission, layout: Layout, config: Any,
                        resources: dict[str, Any]) -> Any:
    import nbformat

    nb = _sanitized(nbformat.reads(sub.text, as_version=4), config, resources)
    present = {c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells}
    missing = [name for name in layout.tests if name not in present]
    if missing:  # their checks still grade the student: show them in the release's cells
        listed = ", ".join(missing[:2]) + (f" and {len(missing) - 2} more" if missing[2:] else "")
        raise _TestCellsDeleted(f"test cells deleted: {listed}")
    return nb


def autograded_notebook(sub: Submission, layout: Layout, config: Any,
                        resources: dict[str, Any], release: Path) -> Any:
    """The submitted notebook as nbgrader's sanitizing leaves it (outputs cleared, locked cells
    and metadata restored from the gradebook), its test cells' outputs the kit's feedback; its
    grades and comments saved in the gradebook. A notebook nbgrader cannot read, or one whose
    test cells were deleted, is shown as a copy of the release holding its answer cells."""
    import nbformat
    from nbgrader.preprocessors import AssignLatePenalties, SaveAutoGrades

    assert sub.found is not None and sub.text is not None
    try:
        nb = _submitted_notebook(sub, layout, config, resources)
    except Exception as error:
        reason = (str(error) if isinstance(error, _TestCellsDeleted)
                  else f"nbgrader cannot read the notebook ({type(error).__name__})")
        note(sub, f"{reason}: its answer cells are shown in a copy of the release")
        nb = nbformat.read(str(release), as_version=4)
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            cell.source = sub.found.sources.get(grade_id, cell.source)
        nb = _sanitized(nb, config, resources)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in layout.tests:
            exercise, hidden, _ = layout.tests[grade_id]
            cell.outputs = [nbformat.from_dict(o) for o in cell_outputs(sub, exercise, hidden)]
    # nbgrader's autograde checks the metadata again here; filling outputs changed none.
    for step in (SaveAutoGrades(config=config), AssignLatePenalties(config=config)):
        nb, resources = step.preprocess(nb, resources)
    return nb


def record(sub: Submission, layout: Layout, *, config: Any, coursedir: Any,
           assignment: str) -> None:
    """Write ``sub`` into the gradebook and ``autograded/``; set its score and late status."""
    with warnings.catch_warnings():
        # SQLAlchemy's chatter inside nbgrader's add_submission, and nbformat's about the
        # student's notebook (duplicate cell ids...), which the status already covers.
        warnings.simplefilter("ignore")
        _record(sub, layout, config, coursedir, assignment)


def _record(sub: Submission, layout: Layout, config: Any, coursedir: Any,
            assignment: str) -> None:
    import nbformat
    from nbgrader.api import Gradebook

    timestamp = _timestamp(sub)
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        gb.update_or_create_student(sub.student)
        gb.update_or_create_submission(assignment, sub.student,
                                       **({"timestamp": timestamp} if timestamp else {}))
    if sub.text is None:  # as nbgrader autograde treats a missing notebook: every grade 0
        with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
            for grade in gb.find_submission_notebook(layout.notebook, assignment,
                                                     sub.student).grades:
                grade.auto_score, grade.needs_manual_grade = 0, False
            gb.db.commit()
    else:
        resources = {"nbgrader": {"notebook": layout.notebook, "assignment": assignment,
                                  "student": sub.student, "db_url": coursedir.db_url}}
        release = Path(coursedir.format_path(coursedir.release_directory, ".", assignment))
        nb = autograded_notebook(sub, layout, config, resources,
                                 release / f"{layout.notebook}.ipynb")
        target = Path(coursedir.format_path(coursedir.autograded_directory, sub.student,
                                            assignment))
        target.mkdir(parents=True, exist_ok=True)
        path = target / f"{layout.notebook}.ipynb"
        path.unlink(missing_ok=True)
        nbformat.write(nb, str(path))
        os.chmod(path, 0o664 if coursedir.groupshared else 0o444)  # as nbgrader's converters
        if sub.timestamp is not None:
            (target / "timestamp.txt").write_bytes(sub.timestamp)
        if sub.result is None:  # the grader failed on it: a person grades it
            with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
                for grade in gb.find_submission_notebook(layout.notebook, assignment,
                                                         sub.student).grades:
                    grade.auto_score, grade.needs_manual_grade = None, True
                gb.db.commit()
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        submission = gb.find_submission(assignment, sub.student)
        penalty = submission.late_submission_penalty or 0
        sub.score, sub.max_score = number(submission.score - penalty), number(
            submission.max_score)
        late = submission.total_seconds_late
        if late > 0:
            note(sub, f"late by {_duration(late)}"
                      + (f", penalty {number(penalty)}" if penalty else ""))


def note(sub: Submission, text: str) -> None:
    """Add ``text`` to the student's status (it replaces a bare ``graded``)."""
    sub.status = text if sub.status == "graded" else f"{sub.status}; {text}"


def _duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min" if minutes else f"{int(seconds)} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"
