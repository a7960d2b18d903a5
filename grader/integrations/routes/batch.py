"""Grading a class: every submission folder under a directory, in parallel, one
``StudentRecord`` per student.

``python -m grader batch DIR --csv FILE [--json-dir DIR] [--jobs N] [--course FILE]``

Start-up is paid once (``GradingRun.start_class``): this process imports NumPy, torch,
Hypothesis and the checks, then forks one grader process per submission (kit code, trusted),
which grades it through the same run, forking its workers per exercise as ``grade`` does, and
sends its record back as the record's own fields. A grader process that dies or overruns costs
its own record only. Records are sorted by student and hold nothing that varies between runs,
so a rerun gives identical files; every file is rendered from them (``outputs``).
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from ...core import lanes, records, replay, replay_store
from ...core.course import DEFAULT_KEY, Course
from ...core.results import StudentRecord
from ...core.run import GradingRun
from ...core.submission import BadSubmission
from ...sandbox.isolation import Limits
from ..outputs import inert


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


def grade_one(path: Path, run: GradingRun) -> StudentRecord:
    """Grade one submission through ``run`` (in a forked grader process)."""
    student = inert.name(path.name)
    try:
        if not path.is_dir():
            return StudentRecord(student, "not graded: not a folder", "not a folder")
        if is_empty(path):
            return StudentRecord(student, "empty", "empty")
        result = run.grade(path)
    except BadSubmission as error:
        why = str(error).replace(str(path), student)
        return StudentRecord(student, inert.text(f"not graded: {why}"), error.kind)
    except OSError as error:
        return StudentRecord(student, inert.text(
            f"not graded: cannot read the folder ({error.strerror})"), "not graded")
    return StudentRecord(student, "graded", "graded", result)


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
    key_folder: Path | None = DEFAULT_KEY,
    progress: TextIO | None = sys.stderr,
    on_record: Callable[[StudentRecord], None] | None = None,
    paths: list[Path] | None = None,
    isolation: str = "",
) -> list[StudentRecord]:
    """Grade every submission under ``root`` (or those of ``paths``, a shard's); returns the
    records sorted by student, each with ``isolation`` (``grader.sandbox.node``'s label).
    ``on_record`` gets each record as soon as it is done (in the order they finish)."""
    if paths is None:
        paths = find_submissions(Path(root), progress if progress is not None else sys.stderr)
    with GradingRun(course, key_folder, limits, max(1, jobs or os.cpu_count() or 1)) as grading:
        return _graded(paths, grading.start_class(), progress, on_record, isolation)


def _graded(paths: list[Path], grading: GradingRun, progress: TextIO | None,
            on_record: Callable[[StudentRecord], None] | None,
            isolation: str) -> list[StudentRecord]:
    course, limits, jobs = grading.course, grading.limits, grading.jobs or 1
    _ADOPTED[0] = 0
    bar = Progress(len(paths), progress) if progress is not None and paths else None
    done: dict[str, StudentRecord] = {}
    running: dict[int, tuple[Path, float, Path]] = {}  # pid -> (submission, deadline, reply)
    pending = list(reversed(paths))
    with tempfile.TemporaryDirectory(prefix="attention-kit-batch-") as tmp:
        while pending or running:
            while pending and len(running) < jobs:
                path = pending.pop()
                reply = Path(tmp) / f"{len(pending)}.json"
                pid = _fork_grader(path, reply, grading)
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
            record = _collect(path, status, reply, time.monotonic() > deadline)
            record.isolation = isolation
            done[record.student] = record
            if on_record is not None:
                on_record(record)
            if bar:
                bar.step(record.student)
    return [done[name] for name in sorted(done)]


def _fork_grader(path: Path, reply: Path, grading: GradingRun) -> int:
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
        before = replay_store.recorded()
        record = grade_one(path, grading)
        reply.write_text(json.dumps(record.to_dict()))
        with contextlib.suppress(Exception):  # the failing runs it kept, for the next graders
            runs = replay_store.named({k for k in replay_store.recorded() - before
                                       if replay.TRANSCRIPT in k})
            if runs:
                replay_store.write_private(_runs_file(reply), pickle.dumps(runs, protocol=5))
    except BaseException as error:  # the kit's own failure: reported in the row
        with contextlib.suppress(Exception):
            reply.write_text(json.dumps(StudentRecord(
                inert.name(path.name), f"not graded: grader error {error!r}",
                "crashed").to_dict()))
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
            known = replay_store.read(path.read_bytes())
            replay_store.adopt({k: v for k, v in known.items() if isinstance(k, tuple)
                                and replay.TRANSCRIPT in k})
            _ADOPTED[0] += size


def _collect(path: Path, status: int, reply: Path, overran: bool) -> StudentRecord:
    student = inert.name(path.name)
    _adopt_runs(reply)
    if reply.is_file():
        with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
            record = StudentRecord.from_dict(json.loads(reply.read_text()))
            if record.student == student:
                return record
    if overran:
        return StudentRecord(student, "not graded: the grader ran past its time limit",
                             "timeout")
    if os.WIFSIGNALED(status):
        return StudentRecord(student, "not graded: the grader was killed by signal "
                                      f"{os.WTERMSIG(status)}", "crashed")
    return StudentRecord(student, "not graded: the grader exited with code "
                                  f"{os.WEXITSTATUS(status)}", "crashed")


def write_json(done: list[StudentRecord], folder: str | os.PathLike[str]) -> None:
    """``--json-dir``: one ``<student>.json`` per graded student (results.json with what the
    instructor alone reads, ``outputs.report.instructor_json``) and every student's record
    (``core.records``), which ``report`` and ``merge`` render again."""
    from ..outputs import report

    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    for record in done:
        report.write_instructor_json(record, target)
        records.write(target, record)
