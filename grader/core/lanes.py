"""Grading one submission's exercises side by side, each in a grading process of its own.

A grading process spends most of an exercise waiting: it sends an example, the worker answers,
it compares, it sends the next. On a machine with two or more cores, two exercises graded at
once take little longer than one. ``graded`` forks one child of the grading process per
exercise (at most ``lanes`` at a time); each grades its exercise exactly as the grading process
would have (``grade_exercise``: its own workers, from the same zygotes), and sends back, over a
pipe only it and its parent hold, the result and the examples it recorded (``replay``) for the
next run. The results are put back in the course's order, so the report is the same, byte for
byte, as one graded an exercise after another.

The children run the kit's code only: the student's code stays in the workers, which the
zygotes fork and which hold none of these pipes. A child that fails (the kit's own error, a
signal) has its exercise graded again in the grading process, where the error is raised as it
would have been. Each child is a grading process to ``cgroups`` (``g<pid>``): its workers get
one CPU and the memory limit, as one exercise always had.

The longest exercises start first: ``graded`` notes how long each lane took, and the command
line keeps those seconds in the kit's build folder for its next run (``load_seconds``,
``save_seconds``), so that no long exercise is left to run alone at the end while the other
cores sit idle. Only the order in which lanes start changes, never a result.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import gc
import json
import math
import os
import pickle
import select
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..sandbox import cgroups
from . import replay
from .student import close_answerers

PR_SET_PDEATHSIG = 1  # prctl(2)

# What a child sends: its result's fields and its recordings, read with the replay cache's
# unpickler (plain data, NumPy arrays and the kit's records: nothing that runs code when read).
_RESULT = "result"
# Seconds each exercise's lane took, by name: this process's, and the last run's (``SECONDS``).
SECONDS = Path(__file__).resolve().parents[2] / "build" / "lanes.json"
_SECONDS: dict[str, float] = {}


def longest_first(names: list[str]) -> list[str]:
    """``names``, the longest to grade (by the seconds last noted) first; those never timed
    keep their order, after the others."""
    return sorted(names, key=lambda name: -_SECONDS.get(name, 0.0))


def load_seconds(path: Path = SECONDS) -> None:
    """Read the seconds a previous run noted (nothing when there are none, or they cannot be
    read: they decide an order, nothing else)."""
    try:
        if path.stat().st_uid != os.geteuid():
            return
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if isinstance(found, dict):
        _SECONDS.update({name: float(seconds) for name, seconds in found.items()
                         if isinstance(name, str) and type(seconds) in (int, float)
                         and math.isfinite(seconds) and seconds >= 0})


def save_seconds(path: Path = SECONDS) -> None:
    """Write the seconds noted so far (the grading user's own file, 0600)."""
    if not _SECONDS:
        return
    with contextlib.suppress(OSError):
        replay.write_private(path, json.dumps(dict(sorted(_SECONDS.items()))).encode())


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, not the machine's count)."""
    with contextlib.suppress(AttributeError, OSError):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def default_lanes() -> int:
    """``grade``'s lanes: one more than the usable CPUs, at most four (one CPU: one lane). A
    lane waits while its workers start and stop, and a third lane fills those waits: on 2
    cores, the whole key 3.66 s against 3.81 s with two (four runs each, alternated)."""
    cpus = usable_cpus()
    return 1 if cpus <= 1 else min(4, cpus + 1)


def graded(names: list[str], grade: Callable[[str], Any], lanes: int,
           rebuild: Callable[[dict[str, Any]], Any],
           ready: Callable[[str], bool] = lambda name: True) -> dict[str, Any]:
    """``grade(name)`` for each of ``names``, ``lanes`` at a time, each in a forked child;
    returns the results by name. ``rebuild`` makes a result again from its fields
    (``dataclasses.asdict``). With one lane, or one name, it grades here, one after another.
    A free lane takes the first name that is ``ready`` (its zygote done with its imports), so
    that no lane waits for torch while a NumPy exercise could be graded, the longest first
    (``longest_first``)."""
    if lanes <= 1 or len(names) <= 1:
        return {name: grade(name) for name in names}
    # The objects made so far are the parent's, and a child only reads them: kept out of the
    # collector's passes, which would otherwise touch (and so copy) every page of them in
    # every child.
    gc.freeze()
    results: dict[str, Any] = {}
    again: list[str] = []  # the children that failed: graded here, after the others
    pending = list(reversed(longest_first(names)))
    running: dict[int, tuple[str, int, list[bytes]]] = {}  # read end -> (name, pid, chunks)
    started: dict[str, float] = {}
    try:
        while pending or running:
            while pending and len(running) < lanes:
                name = next((n for n in reversed(pending) if ready(n)), None)
                if name is None and running:
                    break  # nothing can start yet: look again in a moment
                name = name or pending[-1]  # nothing else to do: the lane waits, not us
                pending.remove(name)
                started[name] = time.monotonic()
                read_end, pid = _fork(name, grade)
                running[read_end] = (name, pid, [])
            waiting = pending and len(running) < lanes
            done, _, _ = select.select(list(running), [], [], 0.05 if waiting else None)
            for read_end in done:
                name, pid, chunks = running[read_end]
                chunk = os.read(read_end, 1 << 20)
                if chunk:
                    chunks.append(chunk)
                    continue
                del running[read_end]
                os.close(read_end)
                _, status = os.waitpid(pid, 0)
                _SECONDS[name] = round(time.monotonic() - started[name], 3)
                found = _read(b"".join(chunks)) if status == 0 else None
                if found is None:
                    again.append(name)
                    continue
                results[name] = rebuild(found["result"])
                replay.adopt(found["recordings"])
    finally:
        for read_end, (_, pid, _) in running.items():  # interrupted: no child outlives us
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            os.close(read_end)
    cgroups.sweep()  # the groups of a lane that ended before it could remove them
    for name in again:
        results[name] = grade(name)
    return {name: results[name] for name in names}


def follow_parent(parent: int) -> None:
    """End this forked child (SIGKILL) when ``parent`` ends, however it ends: a grading run
    that is stopped takes its lanes (and, through them, their workers) with it."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it ended before the request: nobody is waiting for us
        os._exit(1)


def _fork(name: str, grade: Callable[[str], Any]) -> tuple[int, int]:
    parent = os.getpid()
    read_end, write_end = os.pipe()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    pid = os.fork()
    if pid:
        os.close(write_end)
        return read_end, pid
    code = 1
    try:  # the child: grades one exercise, never returns into the parent's loop
        follow_parent(parent)
        os.close(read_end)
        before = replay.recorded()
        result = grade(name)
        payload = {_RESULT: dataclasses.asdict(result),
                   "recordings": replay.named(replay.recorded() - before)}
        with os.fdopen(write_end, "wb") as pipe:
            pickle.dump(payload, pipe, protocol=5)
        code = 0
    except BaseException:  # the kit's own failure: the parent grades the exercise again
        code = 1
    finally:
        with contextlib.suppress(BaseException):  # what exit handlers would do (os._exit runs
            close_answerers()  # none, and the parent's, run here, would remove its folders)
            cgroups.settle()
        os._exit(code)


def _read(data: bytes) -> dict[str, Any] | None:
    try:
        found = replay.read(data)
    except (pickle.UnpicklingError, ValueError, TypeError, EOFError, AttributeError,
            ImportError, IndexError, KeyError):
        return None
    if not isinstance(found, dict) or not isinstance(found.get(_RESULT), dict):
        return None
    return found
