"""One call's limits, kept by the grading process: CPU seconds, read from the kernel's account
of the worker (``/proc/PID/stat``), and wall seconds.

A worker that loops forever in one call would otherwise hold its exercise until the
exercise's own limit (a minute), and lose it: the grading process waits for the reply in short
steps and, between them, reads how much CPU the worker has used since the call began. Nothing
the worker's code does can change that account; a call that waits without computing (a sleep,
a child process doing the work) is stopped by the wall limit instead. A stopped call fails its
check, with its input, and its time is not the exercise's (``Limits.timeout``).
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import time
from collections.abc import Callable

CALL_WALL = 5  # a call's wall limit, in multiples of its CPU limit
# Calls past their own limit an exercise's checks may spend making the input of such a call
# smaller (``grader.core.exercise.HungCall``), each costing that limit again: Hypothesis's
# shrink of one input may take hundreds of steps, and thirty that still looped (2 s each) took
# a loop on logits below -5 only from 4 entries down to 2.
SHRINK_STOPS = 3
STEP = 0.1  # seconds between two reads of the worker's CPU time
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | None) -> float | None:
    """The CPU time (user and system, every thread) the process ``pid`` has used, or None
    when it cannot be read."""
    if pid is None:
        return None
    clock = Clock(pid)
    try:
        return clock.seconds()
    finally:
        clock.close()


class Clock:
    """``cpu_seconds`` of one process, through a descriptor of its ``/proc/PID/stat`` opened
    once and read again at each call (a call's start costs a read, not a path walk and an open:
    a sixth of the time). Once the process is gone, the descriptor still names it, never a
    process that took its pid after it: its reads fail, and ``seconds`` is None."""

    def __init__(self, pid: int) -> None:
        self._fd: int | None = None
        with contextlib.suppress(OSError):
            self._fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)

    def seconds(self) -> float | None:
        if self._fd is None:
            return None
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = os.pread(self._fd, 4096, 0).rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / _TICK
        return None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def wait_for_reply(sock: socket.socket, deadline: float, limit: float,
                   cpu: Callable[[], float | None], cpu_start: float | None,
                   began: float) -> str | None:
    """Wait until ``sock`` has something to read, or until ``deadline`` (a ``time.monotonic()``
    value: the exercise's own limit, left to the caller); ``cpu`` reads the worker's CPU
    seconds (``Clock.seconds``; None while there is no worker yet). Returns why the call must be
    stopped, when it ran past ``limit`` CPU seconds since ``cpu_start`` (None: the worker was
    not there yet when the call began, so all of its CPU time counts), or past ``CALL_WALL``
    times that in wall seconds since ``began`` (when the call was sent: the proxies' answers it
    waited for count); None once there is something to read or the deadline has come. Called
    before each read of the reply (``protocol.recv``'s ``wait``): a reply whose first byte
    comes early and the rest late is held to the same limits as one that comes late whole."""
    if limit <= 0:
        return None
    wall_end = began + CALL_WALL * limit
    while True:
        now = time.monotonic()
        left = min(deadline, wall_end) - now
        if left <= 0:
            if now >= deadline:
                return None  # the exercise's limit: its own message
            return (f"one call took more than {CALL_WALL * limit:g} s and was stopped "
                    "(is it waiting for something that never comes?)")
        readable = bool(select.select([sock], [], [], min(left, STEP))[0])
        if readable and now - began < STEP:  # a reply this quick used under a step
            return None
        used = cpu()
        if used is not None and cpu_start is None:  # a worker born during this call (its
            cpu_start = 0.0  # first, the load): every second of its CPU time is the call's
        if used is not None and cpu_start is not None and used - cpu_start > limit:
            return (f"one call used more than {limit:g} s of CPU time and was stopped "
                    "(an infinite loop, or very slow code?)")
        if readable:
            return None
