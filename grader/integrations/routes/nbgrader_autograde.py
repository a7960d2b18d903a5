"""nbgrader's autograde step without running a notebook.

``python -m grader nbgrader autograde --course PATH [--assignment attention] [--jobs N]``

For every ``submitted/<student>/<assignment>/<assignment>.ipynb`` of the nbgrader course at
PATH: read the notebook as JSON (nothing in it runs) and take its answer cells out as exercise
files by ``grade_id`` (``notebook.answers``); grade them all with the isolated batch grader, in a
forked process that cannot see the course folder (``hide``), from a temporary folder outside it;
and, back in this process, record each student as soon as they are graded, through nbgrader's
own code, as ``nbgrader autograde`` would (``nbgrader_gradebook.record``).

Each student ends with one status: ``graded``, ``late by ...``, ``missing notebook``, ``not a
notebook (...)``, ``answer cell deleted: ...`` (that exercise scores 0), ``duplicated answer
cell: ...`` (the last one is graded, as nbgrader does) or ``not graded: ...`` (the grader failed
on it: its test cells are left for manual grading). One student's problem never stops the
others.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from ...core.course import DEFAULT_KEY, KIT_ROOT, Course, load
from ...core.plural import counted, noun
from ...core.results import StudentRecord
from ...core.submission import BadSubmission, copy_submission
from ...sandbox.isolation import Limits
from ..outputs import inert
from . import hide, kernel
from . import notebook as nbfile
from .nbgrader_gradebook import (  # noqa: F401  (AutogradeError: raised to the command line)
    AutogradeError,
    Layout,
    Submission,
    check_course,
    read_layout,
    record,
)


# -- the course -----------------------------------------------------------------------------
def nbgrader_config(course_dir: Path) -> Any:
    """nbgrader's configuration as its apps load it: the Jupyter config folders'
    ``nbgrader_config.py``, then the course folder's, with the course folder as root."""
    from jupyter_core.paths import jupyter_config_path
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    config = Config()
    for folder in [*reversed(jupyter_config_path()), str(course_dir)]:
        if (Path(folder) / "nbgrader_config.py").is_file():
            config.merge(PyFileConfigLoader("nbgrader_config.py", folder).load_config())
    config.CourseDirectory.root = str(course_dir)
    return config


# -- reading the submissions ---------------------------------------------------------------
def collect(coursedir: Any, assignment: str, layout: Layout) -> list[Submission]:
    """Every student folder for ``assignment`` under ``submitted/``, read but not run."""
    pattern = coursedir.format_path(coursedir.submitted_directory, "*", assignment)
    regexp = coursedir.format_path(coursedir.submitted_directory, "(?P<student>[^/]+)",
                                   re.escape(assignment), escape=True)
    excluded = set(filter(None, coursedir.student_id_exclude.split(",")))
    found = []
    for name in sorted(glob.glob(pattern)):
        path, match = Path(name), re.fullmatch(regexp, name)
        if match is None or not path.is_dir():
            continue
        student = match.group("student")
        if student.startswith(".") or student in excluded:
            continue
        found.append(read_submission(Submission(student, path), layout))
    return found


def read_submission(sub: Submission, layout: Layout) -> Submission:
    """The student's notebook (and nbgrader's ``timestamp.txt``), read as the batch copies a
    submission (``copy_submission``: no link followed, nothing read with more rights than the
    folder's owner has), then its answers taken out."""
    name = f"{layout.notebook}.ipynb"
    with tempfile.TemporaryDirectory(prefix="attention-kit-notebook-") as tmp:
        copy = Path(tmp)
        try:
            copy_submission(sub.folder, copy, only=(name, "timestamp.txt"))
        except BadSubmission as error:
            sub.status = f"not a notebook ({error})"
            return sub
        if (copy / "timestamp.txt").is_file():
            sub.timestamp = (copy / "timestamp.txt").read_bytes()
        path = copy / name
        if not path.is_file():
            sub.status = "missing notebook"
            return sub
        try:
            data = nbfile.read_notebook(path)
        except nbfile.NotANotebook as error:
            sub.status = f"not a notebook ({error})"
            return sub
        sub.text = path.read_text(errors="replace")
    if nbfile.has_surrogates(data):  # nbgrader writes the notebook back as UTF-8: escape them
        sub.text = json.dumps(nbfile.without_surrogates(data))
    sub.found = nbfile.answers(data, layout.answers)
    sub.deleted = [n for n in layout.answers if n not in sub.found.files]
    problems = []
    if sub.deleted:
        problems.append(f"answer cell deleted: {', '.join(sub.deleted)}")
    if sub.found.duplicated:
        problems.append(f"duplicated answer cell: {', '.join(sub.found.duplicated)} "
                        "(the last one graded)")
    sub.status = "; ".join(problems) or "graded"
    return sub


# -- grading, out of sight of the course ---------------------------------------------------
def grade(subs: list[Submission], hidden: list[Path], *, jobs: int | None, course: Course,
          key_folder: Path, limits: Limits, progress: TextIO | None,
          on_graded: Callable[[Submission], None] = lambda sub: None) -> None:
    """Grade every readable submission with ``batch.run`` in a forked process that cannot see
    ``hidden``, from a temporary folder outside them; fills in ``result`` and failures.

    The child writes each record as soon as it is done (a JSON line of its fields);
    ``on_graded`` gets each submission here as its record arrives, so the gradebook is written
    while the others are graded."""
    # keyed as the batch names each folder (a name that is not printable UTF-8, escaped)
    readable = {inert.name(s.student): s for s in subs if s.found is not None}
    total = len(readable)
    if not readable:
        return
    with tempfile.TemporaryDirectory(prefix="attention-kit-autograde-") as tmp:
        root, reply = Path(tmp) / "submissions", Path(tmp) / "rows.jsonl"
        # What the grading process reads from disk (the course file is already loaded).
        needed = [KIT_ROOT, Path(sys.prefix), Path(sys.base_prefix), Path(key_folder),
                  Path(tmp)]
        for path in needed:
            for folder in hidden:
                if path.resolve().is_relative_to(folder.resolve()):
                    raise AutogradeError(f"{path} lies inside {folder}, which the students' "
                                         "code must not see: move it out")
        for sub in readable.values():
            nbfile.write_answers(sub.found, root / sub.student)  # type: ignore[arg-type]
        reply.touch()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                _grade_child(root, reply, hidden, Path(tmp), jobs=jobs, course=course,
                             key_folder=key_folder, limits=limits, progress=progress)
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        done, waiting, unread = False, True, ""
        with open(reply) as rows:  # ASCII lines (json.dumps); the last may be half written
            while waiting:
                waiting = os.waitpid(pid, os.WNOHANG)[0] == 0
                *lines, unread = (unread + rows.read()).split("\n")
                for line in map(json.loads, lines):
                    if line.get("done"):
                        done = True
                    elif line["record"]["student"] in readable:
                        record = StudentRecord.from_dict(line["record"])
                        _take(readable.pop(record.student), record, on_graded)
                if waiting:
                    time.sleep(0.1)
        if not done:
            raise AutogradeError("the grading process failed (see above); "
                                 f"{len(readable)} of {counted(total, 'notebook')} "
                                 f"{noun(len(readable), 'was', 'were')} not recorded")
    for sub in readable.values():  # a submission the batch found nothing in
        _take(sub, None, on_graded)


def _take(sub: Submission, record: StudentRecord | None,
          on_graded: Callable[[Submission], None]) -> None:
    if record is None or not record.graded:
        sub.status = record.status if record else "not graded: no result came back"
    else:
        sub.result = record.result
    on_graded(sub)


def _grade_child(root: Path, reply: Path, hidden: list[Path], tmp: Path, **options: Any) -> None:
    from . import batch

    # Anything a library caches on disk (Hypothesis's storage, say) lands in tmp, never in the
    # course folder or wherever the instructor started this.
    os.chdir(tmp)
    os.environ[kernel.HYPOTHESIS_STORAGE_ENV] = str(tmp / ".hypothesis")
    sys.dont_write_bytecode = True
    how = hide.hide(hidden)
    if not how:
        print("warning: this machine allows no mount namespace and this is not root, so the "
              "course folder stays visible to the students' code, which runs as you. Grade as "
              "root (see docs/instructors.md) to keep it out of reach.", file=sys.stderr)
    closed = hide.closed([p for p in hidden if p.is_dir()]) if how == "permissions" else (
        contextlib.nullcontext())
    with closed, open(reply, "a") as rows:
        def write(line: dict[str, Any]) -> None:
            rows.write(json.dumps(line) + "\n")
            rows.flush()

        batch.run(root, on_record=lambda record: write({"record": record.to_dict()}),
                  **options)
        write({"done": True})


# -- the command -----------------------------------------------------------------------------
def _hidden_paths(course_dir: Path, db_url: str) -> list[Path]:
    """The course folder, and the gradebook where it lives elsewhere."""
    paths = [course_dir]
    if db_url.startswith("sqlite:///"):
        db = Path(db_url.removeprefix("sqlite:///")).resolve()
        if not db.is_relative_to(course_dir):
            paths.append(db)
    return paths


def autograde(course_dir: str | os.PathLike[str], assignment: str = nbfile.ASSIGNMENT, *,
              jobs: int | None = None, course: Course | None = None,
              key_folder: Path = DEFAULT_KEY, limits: Limits = Limits(),
              progress: TextIO | None = sys.stderr) -> list[Submission]:
    """Autograde every collected submission of ``assignment`` in the nbgrader course at
    ``course_dir``; returns one Submission per student, sorted by student."""
    try:
        from nbgrader.api import Gradebook
        from nbgrader.coursedir import CourseDirectory
    except ImportError:
        raise AutogradeError("nbgrader is not installed here (make nbgrader installs it)") from None
    root = Path(course_dir).resolve()
    if not root.is_dir():
        raise AutogradeError(f"{root} is not a folder")
    config = nbgrader_config(root)
    coursedir = CourseDirectory(config=config)
    db = coursedir.db_url
    if db.startswith("sqlite:///") and not Path(db.removeprefix("sqlite:///")).is_file():
        raise AutogradeError(f"no gradebook at {db}: run `nbgrader generate_assignment "
                             f"{assignment}` in {root} first")
    with Gradebook(db, coursedir.course_id) as gb:
        layout = read_layout(gb, assignment)
    course = course or load(layout.course_file)
    check_course(layout, course)
    layout.answers = [name for name in course.names() if name in layout.answers]  # in order
    key = Path(key_folder)
    if not all((key / f"{name}.py").is_file() for name in layout.answers):
        raise AutogradeError(f"the answer key is not in {key}: the hidden test cells need it")
    subs = collect(coursedir, assignment, layout)

    def recorded(sub: Submission) -> None:
        try:
            record(sub, layout, config=config, coursedir=coursedir, assignment=assignment)
        except Exception as error:  # the kit's or nbgrader's failure on this student alone
            sub.status = f"not recorded: {error!r}"

    grade(subs, _hidden_paths(root, db), jobs=jobs, course=course, key_folder=key,
          limits=limits, progress=progress, on_graded=recorded)
    for sub in subs:
        if sub.found is None:  # no notebook to grade: recorded as nbgrader would, all zero
            recorded(sub)
    return subs


def summary(subs: list[Submission]) -> str:
    """One line per student: score and status, then the count graded."""
    width = max([len(s.student) for s in subs] + [len("student")]) + 2
    lines = [f"{'student':<{width}}{'score':<13}status", "-" * (width + 50)]
    for sub in subs:
        score = "" if sub.score is None else f"{sub.score} / {sub.max_score}"
        lines.append(f"{sub.student:<{width}}{score:<13}{sub.status}")
    graded = sum(s.result is not None for s in subs)
    lines += ["-" * (width + 50), f"{graded} of {counted(len(subs), 'notebook')} graded"]
    return inert.plain("\n".join(lines))
