"""Grading one submission's exercises side by side, in grading processes of their own.

A grading process spends much of an exercise waiting: it sends an example, the worker answers,
it compares, it sends the next. On a machine with two or more cores, two exercises graded at
once take little longer than one. A ``Pool`` forks up to ``lanes`` children of the grading
process and sends each the name of an exercise, and another when it is done (a fork costs every
page of the parent that the child then writes, so once per lane rather than once per exercise);
each grades a phase of its exercise (``grader.core.phases``: every visible phase, then, in the
same lanes, every hidden one) exactly as the grading process would have
(``engine.visible_phase``, ``engine.hidden_phase``: its own workers, from the same zygotes), and
sends back, over a pipe only it and its parent hold, the result and the examples it recorded
(``replay``) for the next run. The results are put back in the course's order, so the report is
the same, byte for byte, as one graded an exercise after another.

The children run the kit's code only: the student's code stays in the workers, which the
zygotes fork and which hold none of these pipes. A child that fails (the kit's own error, a
signal) has its exercise graded again in the grading process, where the error is raised as it
would have been. Each child is a grading process to ``cgroups`` (``g<pid>``): its workers get
one CPU and the memory limit, as one exercise always had.

The longest exercises start first: a pool notes how long each lane took, and the command
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
from . import replay_store
from .answer_key import close_answerers

PR_SET_PDEATHSIG = 1  # prctl(2)

# What a child sends: its result's fields and its recordings, read with the replay cache's
# unpickler (plain data, NumPy arrays and the kit's records: nothing that runs code when read).
_RESULT = "result"
# Seconds each exercise's lane took, by name: this process's, and the last run's (``SECONDS``).
SECONDS = Path(__file__).resolve().parents[2] / "build" / "lanes.json"
_SECONDS: dict[str, float] = {}


def longest_first(names: list[str], phase: str = "") -> list[str]:
    """``names``, the longest to grade (by the seconds last noted for ``phase``) first; those
    never timed keep their order, after the others."""
    return sorted(names, key=lambda name: -_SECONDS.get(_timed(name, phase), 0.0))


def _timed(name: str, phase: str) -> str:
    """What the seconds of ``phase`` of exercise ``name`` are noted under."""
    return f"{name} ({phase})" if phase else name


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
        replay_store.write_private(path, json.dumps(dict(sorted(_SECONDS.items()))).encode())


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


@dataclasses.dataclass
class _Lane:
    """A forked grading process that grades the exercises it is sent, one after another."""

    pid: int
    names: int  # the write end of the pipe that sends it names
    results: int  # the read end of the pipe its results come back on
    name: str | None = None  # the exercise it is grading
    started: float = 0.0
    data: bytearray = dataclasses.field(default_factory=bytearray)


def graded(names: list[str], grade: Callable[[str], Any], lanes: int,
           rebuild: Callable[[dict[str, Any]], Any],
           ready: Callable[[str], bool] = lambda name: True,
           finished: Callable[[str, Any], None] = lambda name, result: None,
           ) -> dict[str, Any]:
    """``grade(name)`` for each of ``names``, ``lanes`` at a time (``Pool.graded``), the
    lanes ended once they are all graded."""
    with Pool(grade, lanes) as pool:
        return pool.graded(names, rebuild, ready, finished)


class Pool:
    """Up to ``lanes`` forked children of this process, each of which grades what it is sent,
    one after another (a fork costs every page the child then writes: one per lane, not one
    per exercise), kept from one ``graded`` to the next: ``grader.core.phases`` sends them
    every visible phase, then every hidden one, and a lane's answer-key workers
    (``answer_key.answerer``) serve both. Use it as a context manager: no lane outlives it."""

    def __init__(self, grade: Callable[[str], Any], lanes: int):
        self.grade, self.lanes = grade, lanes
        self.running: list[_Lane] = []
        self.forked = False

    def graded(self, names: list[str], rebuild: Callable[[dict[str, Any]], Any],
               ready: Callable[[str], bool] = lambda name: True,
               finished: Callable[[str, Any], None] = lambda name, result: None,
               phase: str = "", task: Callable[[str], str] = lambda name: name,
               ) -> dict[str, Any]:
        """``grade(task(name))`` for each of ``names``, ``lanes`` at a time; returns the
        results by name. ``task`` is the line a lane is sent for a name (the name itself by
        default), and ``rebuild`` makes a result again from its fields
        (``dataclasses.asdict``). With one lane, or one name, it grades here, one after
        another. A free lane takes the first name that is ``ready`` (its zygote done with its
        imports), so that no lane waits for torch while a NumPy exercise could be graded, the
        longest first (``longest_first``). ``finished(name, result)`` is called here as each
        result arrives (grade's progress lines). ``phase`` names the part of each exercise
        graded (``grader.core.phases``: "" for the visible one), which its seconds are noted
        under."""
        lanes, running = self.lanes, self.running

        def graded_here(name: str) -> Any:
            result = self.grade(task(name))
            finished(name, result)
            return result

        if lanes <= 1 or len(names) <= 1:
            return {name: graded_here(name) for name in names}
        # The objects made so far are the parent's, and a child only reads them: kept out of
        # the collector's passes, which would otherwise touch (and so copy) every page of them
        # in every child.
        gc.freeze()
        results: dict[str, Any] = {}
        again: list[str] = []  # the names whose lane failed: graded here, after the others
        pending = list(reversed(longest_first(names, phase)))
        while pending or any(lane.name for lane in running):
            while pending:
                idle = next((lane for lane in running if lane.name is None), None)
                if idle is None and len(running) >= lanes:
                    break
                name = next((n for n in reversed(pending) if ready(n)), None)
                if name is None and any(lane.name for lane in running):
                    break  # nothing can start yet: look again in a moment
                name = name or pending[-1]  # nothing else to do: the lane waits, not us
                pending.remove(name)
                lane = idle or _start(self.grade, running)
                if idle is None:
                    running.append(lane)
                    self.forked = True
                try:
                    _send(lane, name, task(name))
                except OSError:  # the lane is gone (killed from outside): graded here
                    again.append(name)
                    lane.name = None
                    _stop(lane, kill=True)
                    running.remove(lane)
            waiting = pending and (len(running) < lanes
                                   or any(lane.name is None for lane in running))
            busy = {lane.results: lane for lane in running if lane.name}
            done, _, _ = select.select(list(busy), [], [], 0.05 if waiting else None)
            for read_end in done:
                lane = busy[read_end]
                chunk = os.read(read_end, 1 << 20)
                lane.data += chunk
                size = int.from_bytes(lane.data[:8], "little") if len(lane.data) >= 8 else -1
                if chunk and (size < 0 or len(lane.data) < 8 + size):
                    continue
                name, lane.name = lane.name, None
                assert name is not None
                _SECONDS[_timed(name, phase)] = round(time.monotonic() - lane.started, 3)
                found = _read(bytes(lane.data[8:8 + size])) if chunk else None
                if not chunk:  # the lane died: its exercise is graded here
                    _stop(lane)
                    running.remove(lane)
                if found is None:
                    again.append(name)
                    continue
                results[name] = rebuild(found["result"])
                replay_store.adopt(found["recordings"])
                finished(name, results[name])
        for name in again:
            results[name] = graded_here(name)
        return {name: results[name] for name in names}

    def close(self) -> None:
        """End every lane: those at rest finish and exit, one still grading (interrupted) is
        killed."""
        running, self.running = self.running, []
        for lane in running:
            _stop(lane, kill=bool(lane.name))
        if self.forked:
            cgroups.sweep()  # the groups of a lane that ended before it could remove them

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _send(lane: _Lane, name: str, task: str) -> None:
    """Give ``lane`` the exercise ``name`` to grade next: the line ``task`` (one line)."""
    lane.name, lane.started, lane.data = name, time.monotonic(), bytearray()
    os.write(lane.names, task.encode() + b"\n")


def _stop(lane: _Lane, *, kill: bool = False) -> None:
    """End a lane: no more names (it finishes and exits), or killed (``kill``)."""
    with contextlib.suppress(OSError):
        os.close(lane.names)
    if kill:
        with contextlib.suppress(OSError):
            os.kill(lane.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.waitpid(lane.pid, 0)
    with contextlib.suppress(OSError):
        os.close(lane.results)


def follow_parent(parent: int) -> None:
    """End this forked child (SIGKILL) when ``parent`` ends, however it ends: a grading run
    that is stopped takes its lanes (and, through them, their workers) with it."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it ended before the request: nobody is waiting for us
        os._exit(1)


def _start(grade: Callable[[str], Any], others: list[_Lane]) -> _Lane:
    """Fork a lane: it reads names, one per line, and answers each with its result and the
    examples it recorded meanwhile (a length, then the pickle), until there are no more
    (``others``: the lanes already running, whose pipes it must not hold)."""
    parent = os.getpid()
    names_read, names_write = os.pipe()
    results_read, results_write = os.pipe()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    pid = os.fork()
    if pid:
        os.close(names_read)
        os.close(results_write)
        return _Lane(pid, names_write, results_read)
    code = 1
    try:  # the child: grades what it is sent, never returns into the parent's loop
        follow_parent(parent)
        for fd in [names_write, results_read, *(f for o in others for f in (o.names, o.results))]:
            os.close(fd)  # another lane's names: held here, that lane would never see their end
        with os.fdopen(names_read, "rb") as asked, os.fdopen(results_write, "wb") as out:
            for line in asked:
                before = replay_store.recorded()
                result = grade(line.decode().strip())
                payload = pickle.dumps(
                    {_RESULT: dataclasses.asdict(result),
                     "recordings": replay_store.named(replay_store.recorded() - before)},
                    protocol=5)
                out.write(len(payload).to_bytes(8, "little") + payload)
                out.flush()
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
        found = replay_store.read(data)
    except (pickle.UnpicklingError, ValueError, TypeError, EOFError, AttributeError,
            ImportError, IndexError, KeyError):
        return None
    if not isinstance(found, dict) or not isinstance(found.get(_RESULT), dict):
        return None
    return found
