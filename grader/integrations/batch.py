"""Grading a class: every submission folder under a directory, in parallel, into one CSV.

``python -m grader batch DIR --csv FILE [--json-dir DIR] [--jobs N] [--course FILE]``

Start-up is paid once: this process imports NumPy, torch, Hypothesis and the checks, then forks
one grader process per submission (kit code, trusted), which forks its workers per exercise as
``grade`` does. A grader process that dies or overruns costs its own row only. Rows are sorted
by student and hold nothing that varies between runs, so a rerun gives identical files.
"""

from __future__ import annotations

import contextlib
import csv
import gc
import hashlib
import json
import os
import pickle
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..core import engine, lanes, replay
from ..core.course import EXERCISES_BY_NAME, Course, load, number
from ..sandbox import cgroups, isolation
from ..sandbox.isolation import Limits
from ..sandbox.zygote import huge_pages
from . import inert, report


def columns(course: Course) -> tuple[str, ...]:
    """student, the core exercises, total, status, then the bonus track and its total."""
    return ("student", *course.names("core"), "total", "status", *course.names("bonus"),
            "bonus_total")


@dataclass
class Row:
    student: str
    status: str
    scores: dict[str, int] = field(default_factory=dict)
    total: int | None = None
    bonus: dict[str, int | None] = field(default_factory=dict)  # None: not attempted
    results: dict[str, Any] | None = None  # results.json, with the instructor-only output
    isolation: str = ""  # the workers' isolation where less than root's (grader.sandbox.node)

    def cells(self, course: Course) -> list[str]:
        graded = self.status == "graded"
        bonus = [self.bonus.get(n) for n in course.names("bonus")]
        status = f"{self.status} (isolation: {self.isolation})" if self.isolation else self.status
        return [self.student,
                *(str(self.scores[n]) if graded else "" for n in course.names("core")),
                str(self.total) if graded else "", status,
                *("" if b is None else str(b) for b in bonus),
                str(number(sum(b for b in bonus if b is not None))) if graded else ""]


def find_submissions(root: Path, warnings: TextIO | None = sys.stderr) -> list[Path]:
    """One folder per student under ``root``, sorted by name. Hidden names are left out, and
    so is anything that is not a folder, with a warning on ``warnings``: a stray file is not a
    student."""
    found = []
    for path in sorted(root.iterdir(), key=lambda p: p.name):
        if path.name.startswith("."):
            continue
        if path.is_dir():
            found.append(path)
        elif warnings is not None:
            warnings.write(f"warning: skipped {path.name}: not a folder (each student's "
                           "submission is a folder)\n")
    return found


def is_empty(folder: Path) -> bool:
    """No file in it (hidden names and caches aside, and never entered): nothing was
    submitted."""
    for _, folders, files in os.walk(folder):
        if any(not f.startswith(".") for f in files):
            return False
        folders[:] = [f for f in folders if not f.startswith(".") and f != "__pycache__"]
    return True


def preload(course: Course | None = None, key_folder: Path | None = None) -> None:
    """Do once, here, what every grader would otherwise do again: start the one zygote every
    grader asks for its workers, import the checks, and grade the answer key once (the graders,
    forked after it, start with the key's modules imported and Hypothesis's strategies and
    torch's kernels warm; grading is seeded, so what it warms changes no result)."""
    isolation.start_zygote(many=True)
    EXERCISES_BY_NAME()
    if course is not None and key_folder is not None and Path(key_folder).is_dir():
        with contextlib.suppress(Exception):
            engine.grade_submission(key_folder, course=course, key_folder=key_folder)


def grade_one(path: Path, *, course: Course, limits: Limits, key_folder: Path | None) -> Row:
    """Grade one submission (runs in a forked grader process)."""
    student = inert.name(path.name)
    try:
        if not path.is_dir():
            return Row(student, "not graded: not a folder")
        if is_empty(path):
            return Row(student, "empty")
        result = engine.grade_submission(path, course=course, key_folder=key_folder,
                                         limits=limits)
    except (engine.BadSubmission, OSError) as error:
        why = str(error).replace(str(path), student) if isinstance(
            error, engine.BadSubmission) else f"cannot read the folder ({error.strerror})"
        return Row(student, inert.text(f"not graded: {why}"))
    scores = {name: e.score for name, e in result.exercises.items()}
    bonus = {name: e.score if e.attempted else None for name, e in result.bonus.items()}
    return Row(student, "graded", scores, result.score, bonus,
               report.to_json(result, include_output=True))


def _deadline(limits: Limits, course: Course) -> float:
    # Each exercise may use its limit twice over (the student's worker and the key's), plus
    # start and stop, and its calls stopped at their own limit, which that limit leaves out;
    # a grader past this is stuck and is killed.
    return sum(2 * limits.timeout + 10 + e.stopped_seconds(limits)
               for e in course.exercises()) + 30


class Progress:
    def __init__(self, total: int, stream: TextIO):
        self.total, self.stream, self.done = total, stream, 0
        self.start = time.monotonic()
        self.tty = stream.isatty()
        self.last = -1.0

    def step(self, student: str) -> None:
        self.done += 1
        elapsed = time.monotonic() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate else 0.0
        width = 30
        filled = width * self.done // max(self.total, 1)
        line = (f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}  "
                f"{rate * 60:5.1f}/min  elapsed {_clock(elapsed)}  ETA {_clock(eta)}  {student}")
        if self.tty:
            self.stream.write("\r\033[K" + line[:150])
            if self.done == self.total:
                self.stream.write("\n")
        elif self.done == self.total or elapsed - self.last >= 5:
            self.stream.write(line + "\n")
            self.last = elapsed
        self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s"


def run(
    root: str | os.PathLike[str],
    *,
    jobs: int | None = None,
    limits: Limits = Limits(),
    course: Course | None = None,
    key_folder: Path | None = engine.DEFAULT_KEY,
    progress: TextIO | None = sys.stderr,
    on_row: Callable[[Row], None] | None = None,
    paths: list[Path] | None = None,
    isolation: str = "",
) -> list[Row]:
    """Grade every submission under ``root`` (or those of ``paths``, a shard's); returns the
    rows sorted by student, each with ``isolation`` (``grader.sandbox.node``'s label).
    ``on_row`` gets each row as soon as it is done (in the order they finish)."""
    course = course or load()
    if paths is None:
        paths = find_submissions(Path(root), progress if progress is not None else sys.stderr)
    jobs = max(1, jobs or os.cpu_count() or 1)
    _ADOPTED[0] = 0
    preload(course, key_folder)
    gc.freeze()  # the graders only read what is loaded now: no collection copies its pages
    huge_pages()  # each grader a fork of it: a third of the fork's cost (zygote.huge_pages)
    cgroups.sweep()
    if key_folder is not None and Path(key_folder).is_dir():
        engine.protect_key(Path(key_folder))
    bar = Progress(len(paths), progress) if progress is not None and paths else None
    rows: dict[str, Row] = {}
    running: dict[int, tuple[Path, float, Path]] = {}  # pid -> (submission, deadline, reply)
    pending = list(reversed(paths))
    with tempfile.TemporaryDirectory(prefix="attention-kit-batch-") as tmp:
        while pending or running:
            while pending and len(running) < jobs:
                path = pending.pop()
                reply = Path(tmp) / f"{len(pending)}.json"
                pid = _fork_grader(path, reply, course, limits, key_folder)
                running[pid] = (path, time.monotonic() + _deadline(limits, course), reply)
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                now = time.monotonic()
                for stuck, (_, deadline, _) in running.items():
                    if now > deadline:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(stuck, signal.SIGKILL)
                time.sleep(0.02)
                continue
            if pid not in running:
                continue
            path, deadline, reply = running.pop(pid)
            row = _collect(path, status, reply, time.monotonic() > deadline)
            row.isolation = isolation
            rows[row.student] = row
            if on_row is not None:
                on_row(row)
            if bar:
                bar.step(row.student)
    cgroups.sweep()  # the groups of graders that were killed before they could remove them
    return [rows[name] for name in sorted(rows)]


def _fork_grader(path: Path, reply: Path, course: Course, limits: Limits,
                 key_folder: Path | None) -> int:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    code = 0
    try:  # the grader process: never returns into the batch loop
        lanes.follow_parent(parent)  # a batch that is stopped stops its graders
        before = replay.recorded()
        row = grade_one(path, course=course, limits=limits, key_folder=key_folder)
        reply.write_text(json.dumps(row.__dict__))
        with contextlib.suppress(Exception):  # the failing runs it kept, for the next graders
            runs = replay.named({k for k in replay.recorded() - before if replay.TRANSCRIPT in k})
            if runs:
                replay.write_private(_runs_file(reply), pickle.dumps(runs, protocol=5))
    except BaseException as error:  # the kit's own failure: reported in the row
        with contextlib.suppress(Exception):
            reply.write_text(json.dumps(Row(inert.name(path.name),
                                            f"not graded: grader error {error!r}").__dict__))
        code = 1
    finally:
        os._exit(code)


def _runs_file(reply: Path) -> Path:
    return reply.with_suffix(".runs")


# What a grader's failing runs (``replay.followed``) may add to the batch: a failing attention
# check's run is about 20 KB, and the graders forked after it follow it without drawing. A
# class's runs stop being kept past MAX_BATCH_RUNS_BYTES in all (a class of students failing
# many checks, each differently and at length, would otherwise fill this process, and every
# grader forked from it): later students are graded as before, by Hypothesis.
MAX_RUNS_BYTES = 8 << 20
MAX_BATCH_RUNS_BYTES = 256 << 20
_ADOPTED = [0]  # the bytes of the side files kept so far in this batch


def _adopt_runs(reply: Path) -> None:
    """Keep the failing runs a grader kept (``replay.followed``), so that the graders forked
    from now on can follow them. They change no result, only how fast one is reached: code
    leaves a run as soon as its outcome differs, and its replies so far are served again."""
    path = _runs_file(reply)
    with contextlib.suppress(OSError, pickle.UnpicklingError, ValueError, TypeError, EOFError,
                             AttributeError, ImportError, IndexError, KeyError):
        found = path.stat()
        size = found.st_size
        if (size <= MAX_RUNS_BYTES and _ADOPTED[0] + size <= MAX_BATCH_RUNS_BYTES
                and found.st_uid == os.geteuid()):
            known = replay.read(path.read_bytes())
            replay.adopt({k: v for k, v in known.items() if isinstance(k, tuple)
                          and replay.TRANSCRIPT in k})
            _ADOPTED[0] += size


def _collect(path: Path, status: int, reply: Path, overran: bool) -> Row:
    student = inert.name(path.name)
    _adopt_runs(reply)
    if reply.is_file():
        with contextlib.suppress(ValueError, TypeError):
            row = Row(**json.loads(reply.read_text()))
            if row.student == student:
                return row
    if overran:
        return Row(student, "not graded: the grader ran past its time limit")
    if os.WIFSIGNALED(status):
        return Row(student, f"not graded: the grader was killed by signal {os.WTERMSIG(status)}")
    return Row(student, f"not graded: the grader exited with code {os.WEXITSTATUS(status)}")


def write_csv(rows: list[Row], path: str | os.PathLike[str], course: Course | None = None) -> None:
    course = course or load()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(columns(course))
        for row in rows:
            writer.writerow(inert.csv_row(row.cells(course)))


def write_json(rows: list[Row], folder: str | os.PathLike[str]) -> None:
    """One ``<student>.json`` per graded student (instructor-only: includes printed output)."""
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    for row in rows:
        if row.results is not None:
            file, results = json_name(row.student), row.results
            if file != f"{row.student}.json":  # the file's name cannot hold the student's
                results = {**results, "instructor": {**results.get("instructor", {}),
                                                     "student": row.student}}
            with open(target / file, "w") as handle:
                json.dump(results, handle, indent=2, sort_keys=True)
                handle.write("\n")


def json_name(student: str) -> str:
    """``<student>.json``, or, for a name too long for a file name, its first characters and
    a digest (the JSON then says whose it is under ``instructor.student``)."""
    file = f"{student}.json"
    if len(file.encode()) <= 255:
        return file
    digest = hashlib.sha256(student.encode()).hexdigest()[:16]
    return f"{student.encode()[:200].decode(errors='ignore')}~{digest}.json"
