"""Running a submission's code in a worker process, under limits (the grading side).

``Sandbox`` asks the zygote (``grader.sandbox.zygote``) for a worker that loads one exercise of
one submission, and turns its replies into values, ``StudentError`` (the student's code raised)
or ``WorkerLost`` (the worker crashed, hung, exited, ran out of memory, broke a rule or sent
something that is not a reply to the request: the exercise is over, the grade goes on). Those
errors, and ``printable`` (student-made text as it may be shown), are
``grader.sandbox.errors``'s, split from this module.

Every request carries a number that its reply must echo, and nothing may follow a reply: a
forged, extra or unreadable frame ends the exercise with "the worker sent a malformed reply".
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import call_limit, cgroups, protocol, readers, zygote_client
from .audit import REFUSED
from .confine import (  # noqa: F401  (GiB, Limits, unprivileged_user: re-exported)
    GiB,
    Limits,
    claim_sandbox_user,
    kill_user_processes,
    unprivileged_user,
)
from .errors import CONTROL, CallTimedOut, StudentError, WorkerLost, printable
from .mounts import PACKAGES
from .zygote import EXIT_FORBIDDEN
from .zygote_client import (  # noqa: F401  (re-exported: the zygotes, as the Sandbox asks them)
    _ZYGOTES,
    FRAMEWORKS,
    Zygote,
    zygote,
)

OUTPUT_CAP = 4096  # characters of captured output kept for the instructor
TRUNCATED = "\n[... output truncated]"
MALFORMED = "the worker sent a malformed reply"
FORBIDDEN = ("it called one of torch's own attention implementations "
             "(F.scaled_dot_product_attention, F.multi_head_attention_forward, "
             "nn.MultiheadAttention or a Transformer layer), and the exercise is to write "
             "attention, so it may not")
MEASURED_CALLS = 10  # a measured operation's one call, in calls' CPU limits (``twin``)
# A torch worker's call, in calls' CPU limits: torch imports parts of itself inside a first
# call on some paths (a first error on the meta device imports torch._dynamo: 1.2 to 1.5 s of
# CPU), and preloading them in the zygote would cost every grading run that time.
TORCH_CALLS = 2.5


@dataclass(frozen=True)
class Spent(Limits):
    """An exercise's limits, ``spent`` seconds of whose time went before its first worker
    started: reading its files (``grader.core.view``), which is the student's time too."""

    spent: float = 0.0


def start_zygote(frameworks: set[str] | None = None, many: bool = False) -> None:
    """Start now the processes a grading run asks for work, so that their start-up overlaps
    with the grading process's own: the zygotes (``zygote_client.start_zygote``: those of
    ``frameworks``, or all; ``many``: they will fork a class's workers) and the reader
    (``readers.start``), which reads every exercise's files first."""
    zygote_client.start_zygote(frameworks, many)
    readers.start()


# -- one worker --------------------------------------------------------------------------------
# What the replies of an exercise phase's passes (``Sandbox.batch``) may add up to before the
# rest are asked one at a time: an honest exercise's are a few MB.
BATCH_BYTES = 32 << 20


class Sandbox:
    """One worker process for one exercise of one submission."""

    def __init__(
        self,
        folder: Path,
        exercise: str,
        *,
        limits: Limits = Limits(),
        trusted: bool = False,
        package: str = "submission",
        framework: str = "torch",
        answer: Any = None,
    ):
        self.folder = Path(folder).resolve()
        self.exercise = exercise
        self.limits = limits
        self.framework = framework
        self.trusted = trusted
        self.package = package
        # Answers a proxy's question (another exercise's function) during a request: a
        # function of the question that returns {"ok": True, "value"} or {"ok": False, "error"}.
        self.answer = answer
        # seconds spent waiting for the worker (and reading its files): the student's time
        self.used = limits.spent if isinstance(limits, Spent) else 0.0
        self.closed = False
        self.pid: int | None = None
        self.mode = ""
        self._status_text = b""
        self._exit: int | None = None
        self._sequence = 0
        self.last_frame = b""  # the bytes of the last reply (``reread``)
        self._clock: call_limit.Clock | None = None
        self._timed_out = False
        self._lost = ""  # why the worker was lost, for any request after
        self._loading: dict[str, Any] | None = None  # the "load" request, for a fresh worker
        self.printed: Any = None  # what each call of a pass printed (``passes.Printed``)
        self.config = {"folder": str(self.folder), "exercise": exercise, "package": package}
        self._output = tempfile.TemporaryFile()
        self._start()

    def _start(self) -> None:
        """Have the zygote fork a worker, and wait for its keeper to report it."""
        limits, trusted, framework = self.limits, self.trusted, self.framework
        user = None if trusted or not limits.drop_privileges else unprivileged_user()
        self._uid_lock: int | None = None
        if user is not None:
            user, self._uid_lock = claim_sandbox_user(user)
        self.user = user
        # Made by this process, joined by the keeper before it forks: the kernel's limits.
        self.group = cgroups.worker_group(limits.memory, limits.processes)
        self._sock, child = socket.socketpair()
        self._status, status_child = socket.socketpair()
        try:
            zygote(framework).spawn(
                {"config": self.config, "confine": {
                    "timeout": limits.timeout, "memory": limits.memory,
                    "network": limits.network, "scratch": limits.scratch,
                    "processes": limits.processes,
                    "cgroups": self.group.procs if self.group is not None else [],
                    "grouped": self.group.controllers if self.group is not None else [],
                    "user": [user.pw_uid, user.pw_gid] if user is not None else None,
                    "trusted": trusted,
                    "packages": PACKAGES[framework]}},
                [child.fileno(), self._output.fileno(), status_child.fileno()],
            )
        finally:
            child.close()
            status_child.close()
        words = self._status_line(timeout=60.0).split()
        if len(words) != 3 or words[0] != "pid":
            self.kill()
            raise RuntimeError("the zygote's keeper did not report a worker")
        self.pid, self.mode = int(words[1]), words[2]

    # -- the keeper's status socket ---------------------------------------------------------
    def _restart(self) -> None:
        """After a call that ran past its limit: a fresh worker in its place, the file loaded
        again, the exercise's time used so far still counted (its output goes on in the same
        capture)."""
        self.closed, self._timed_out, self._exit = False, False, None
        self._status_text, self.pid = b"", None
        if self.printed is not None:
            self.printed.restarted(self._output)
        self._start()
        if self._loading is not None:
            self.request("load", **self._loading)

    def _status_line(self, timeout: float) -> str:
        end = time.monotonic() + timeout
        while b"\n" not in self._status_text:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self._status], [], [], left)[0]:
                return ""
            data = self._status.recv(256)
            if not data:
                return ""
            self._status_text += data
        line, self._status_text = self._status_text.split(b"\n", 1)
        return line.decode()

    def _wait_exit(self, timeout: float) -> int | None:
        if self._exit is None:
            words = self._status_line(timeout).split()
            if len(words) == 2 and words[0] == "exit":
                self._exit = int(words[1])
        return self._exit

    # -- talking --------------------------------------------------------------------------
    def request(self, op: str, **kwargs: Any) -> Any:
        if self.closed and self._timed_out:
            self._restart()
        if self.closed:  # what stopped it, again
            raise WorkerLost(self._lost or "the worker was already stopped")
        if op == "load":
            self._loading = kwargs
        try:
            return self._exchange(op, kwargs)
        except CallTimedOut:
            raise
        except WorkerLost as lost:
            self._lost = lost.reason
            raise

    def _exchange(self, op: str, kwargs: dict[str, Any]) -> Any:
        start = time.monotonic()
        remaining = self.limits.timeout - self.used
        stopped = False  # at the call's own limit: its time is not the exercise's
        self._sequence += 1
        cpu = self._cpu() if self.limits.call else None
        try:
            self._sock.settimeout(max(remaining, 1e-3))  # a stuck worker cannot block a send
            protocol.send(self._sock, {"op": op, "id": self._sequence, "kwargs": kwargs})

            def within() -> None:  # before every read of the reply, its first byte to its last
                self._within_call_limits(start + remaining, cpu, start)

            frame = protocol.recv_frame(self._sock, start + remaining, within)
            reply = protocol.decode(frame)
            while self._is_question(reply):  # a proxy asks: its time is the student's
                protocol.send(self._sock, {**self.answer(reply), "id": self._sequence})
                frame = protocol.recv_frame(self._sock, start + remaining, within)
                reply = protocol.decode(frame)
            extra = self._pending()
        except CallTimedOut:
            stopped = True
            raise
        except TimeoutError:
            self.used = self.limits.timeout
            self.kill()
            raise WorkerLost(
                f"stopped after {self.limits.timeout:g} s: the time limit for one exercise "
                "(an infinite loop, or very slow code?)"
            ) from None
        except (EOFError, OSError):
            raise WorkerLost(self._death_reason()) from None
        except (protocol.ProtocolError, ValueError, TypeError, OverflowError, RecursionError):
            self.kill()
            raise WorkerLost(MALFORMED) from None
        finally:
            if not stopped:
                self.used += time.monotonic() - start
        if extra or not isinstance(reply, dict) or reply.get("id") != self._sequence:
            self.kill()
            raise WorkerLost(MALFORMED)
        self.last_frame = frame
        return self.answered(reply)

    def batch(self, calls: list[dict[str, Any]], budget: int | None = None) -> list[tuple]:
        """Every one of ``calls`` asked in one pass (``grader.sandbox.passes.batch``)."""
        from .passes import batch

        return batch(self, calls, BATCH_BYTES if budget is None else budget)

    def read_part(self, part: int) -> None:
        """A check read the answer of a pass's call ``part``: what it printed shows there."""
        if self.printed is not None:
            self.printed.read(part, self._output)

    def reread(self, frame: bytes) -> Any:
        """What ``request`` gave for the reply whose bytes were ``frame`` (its ``last_frame``
        then), again: a new value, or the StudentError raised from the same place."""
        try:
            reply = protocol.decode(frame)
        except (protocol.ProtocolError, ValueError, TypeError, OverflowError, RecursionError):
            raise WorkerLost(MALFORMED) from None
        return self.answered(reply)

    def answered(self, reply: dict[str, Any]) -> Any:
        """The value of a reply, or the student's error it carries, raised (StudentError)."""
        if "fatal" in reply:
            self.kill()
            raise WorkerLost(printable(reply["fatal"], 1000))
        if reply.get("ok") is True and set(reply) == {"ok", "value", "id"}:
            return reply["value"]
        info = reply.get("error")
        if reply.get("ok") is False and isinstance(info, dict):
            raise StudentError(info)
        self.kill()
        raise WorkerLost(MALFORMED)

    def _within_call_limits(self, deadline: float, cpu: float | None, began: float) -> None:
        """Wait for the reply within the call's own limits (``call_limit``): past them, the
        worker is stopped and CallTimedOut raised."""
        why = call_limit.wait_for_reply(self._sock, deadline, self.call_seconds, self._cpu,
                                        cpu, began)
        if why is not None:
            self.kill()
            self._timed_out = True
            raise CallTimedOut(why)

    @property
    def call_seconds(self) -> float:
        """The CPU seconds one call of this worker may take (``Limits.call``)."""
        return self.limits.call * (TORCH_CALLS if self.framework == "torch" else 1)

    def _cpu(self) -> float | None:
        """The worker's CPU seconds, through a ``call_limit.Clock`` made once its pid is known
        (``worker_pid``); None before."""
        if self._clock is None:
            pid = self.worker_pid()
            if pid is None:
                return None
            self._clock = call_limit.Clock(pid)
        return self._clock.seconds()

    def _is_question(self, message: Any) -> bool:
        return (self.answer is not None and isinstance(message, dict) and "ask" in message
                and message.get("id") == self._sequence)

    def _pending(self) -> bool:
        """Whether bytes follow the reply just read (a frame the worker was not asked for)."""
        timeout = self._sock.gettimeout()
        self._sock.setblocking(False)
        try:
            return bool(self._sock.recv(1, socket.MSG_PEEK))
        except (BlockingIOError, InterruptedError):
            return False
        finally:
            self._sock.settimeout(timeout)

    def _death_reason(self) -> str:
        status = self._wait_exit(timeout=5.0)
        oom = self.group.oom_kills() if self.group is not None else 0
        self.kill()
        if oom:
            return (f"out of memory: the worker used more than {self.limits.memory / GiB:g} "
                    "GiB (shared memory included), and the kernel stopped it")
        if status is None:
            return "the worker stopped answering"
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig
            if sig == signal.SIGXCPU:
                return "the code used more CPU time than allowed"
            if sig == signal.SIGKILL:
                return "the worker was killed (out of memory?)"
            return f"the worker crashed with signal {name}"
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == EXIT_FORBIDDEN:
            return FORBIDDEN
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) in REFUSED:  # the audit hook
            return REFUSED[os.WEXITSTATUS(status)]
        if os.WIFEXITED(status):
            return f"the code ended the worker process (exit code {os.WEXITSTATUS(status)})"
        return "the worker ended"

    # -- measured from outside ----------------------------------------------------------------
    def worker_pid(self) -> int | None:
        """The worker's pid as this process sees it: init's only child where the worker has
        namespaces of its own, the process the keeper reported otherwise."""
        if self.pid is None or self.mode == "plain":
            return self.pid
        with contextlib.suppress(OSError, ValueError):
            children = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()
            return int(children[0]) if children else None
        return None

    def memory(self, field: str = "VmRSS") -> int | None:
        """A memory figure of the worker in bytes, read by the kernel's account of it
        (``/proc/PID/status``: ``VmRSS`` now, ``VmHWM`` its peak): nothing the worker's code
        can report or fake. None when it cannot be read."""
        pid = self.worker_pid()
        if pid is None:
            return None
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
        return None

    def twin(self, *, single: bool = False) -> Sandbox:
        """A fresh worker for the same exercise of the same submission, with the same limits;
        ``single``: one that may start no other process or thread (as root: a sandbox uid's
        process limit of 1), for a measure of its memory that nothing escapes, whose one call
        (on an input made big on purpose) may take ``MEASURED_CALLS`` times a call's limit."""
        limits = replace(self.limits, processes=1, call=self.limits.call * MEASURED_CALLS) \
            if single else self.limits
        return Sandbox(self.folder, self.exercise, limits=limits, trusted=self.trusted,
                       package=self.package, framework=self.framework, answer=self.answer)

    # -- stopping -------------------------------------------------------------------------
    def kill(self) -> None:
        """End the worker and everything it started; wait until the keeper says so."""
        if not self.closed:
            with contextlib.suppress(OSError):
                self._status.sendall(b"k")
            self._wait_exit(timeout=30.0)
            self.closed = True
            self._sock.close()
            self._status.close()
            if self._clock is not None:
                self._clock.close()
                self._clock = None
            if self.group is not None:  # its keeper may still be on its way out
                self.group.remove(wait=False)
        if self._uid_lock is not None and self.user is not None:
            # With a PID namespace nothing of the worker is left; without one, sweep by uid.
            if self.mode != "root":
                kill_user_processes(self.user.pw_uid)
            os.close(self._uid_lock)
            self._uid_lock = None

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(Exception):
                self._sock.settimeout(2.0)
                self._sequence += 1
                protocol.send(self._sock, {"op": "exit", "id": self._sequence, "kwargs": {}})
                protocol.recv(self._sock, time.monotonic() + 2.0)
        self.kill()

    def output(self) -> str:
        """What the student's code printed, capped; for the instructor's eyes only. What it
        printed in a pass is shown where a check read that call's answer, and only then
        (``passes.Printed``): the output reads as if each call had been asked alone."""
        self._output.seek(0)
        data = self._output.read(OUTPUT_CAP + 1) if self.printed is None else \
            self.printed.assemble(self._output, OUTPUT_CAP + 1)
        text = data[:OUTPUT_CAP].decode("utf-8", "replace").translate(
            {k: v for k, v in CONTROL.items() if k not in (9,)})
        return text + (TRUNCATED if len(data) > OUTPUT_CAP else "")

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        self._output.close()
