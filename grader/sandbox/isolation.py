"""Running a submission's code in a worker process, under limits.

``Sandbox`` starts a worker (``grader.sandbox.worker``) for one exercise of one submission and turns
its replies into values, ``StudentError`` (the student's code raised) or ``WorkerLost`` (the
worker crashed, hung, exited, ran out of memory or broke the protocol: the exercise is over).

Start methods: ``fork`` (the default without CUDA: the worker starts with NumPy and torch
already imported) and ``spawn`` (a fresh interpreter; used when CUDA is available, because a
CUDA context does not survive fork).

In the worker, before any student code runs: stdin from /dev/null, stdout/stderr to a capped
capture file, the grader's other descriptors closed, and the confinement of
``grader.sandbox.confine`` (a new session, memory, CPU, file-size and process limits, no
network, and, when grading as root, a sandbox uid of its own).
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import protocol
from .confine import (  # noqa: F401  (Limits, GiB, PRELOAD, unprivileged_user: re-exported)
    KIT_ROOT,
    PRELOAD,
    GiB,
    Limits,
    _close_inherited,
    _readable_by_others,
    claim_sandbox_user,
    kill_user_processes,
    restrict,
    unprivileged_user,
)

OUTPUT_CAP = 4096  # characters of captured output kept for the instructor

class StudentError(Exception):
    """The student's code raised an exception (or returned something unusable)."""

    def __init__(self, info: dict[str, Any]):
        self.info = info
        super().__init__(f"{info.get('type')}: {info.get('message')}")

    @property
    def type(self) -> str:
        return str(self.info.get("type"))

    @property
    def is_value_error(self) -> bool:
        return bool(self.info.get("value_error"))

    @property
    def not_implemented(self) -> bool:
        return bool(self.info.get("not_implemented"))

    def describe(self) -> str:
        text = f"{self.info.get('type')}: {self.info.get('message')}"
        where = self.info.get("where") or []
        if where:
            text += f" (at {where[-1]})"
        return text


class WorkerLost(BaseException):
    """The worker can answer no more; the exercise scores zero with ``reason``.

    A BaseException, so that Hypothesis stops at once instead of shrinking on it.
    """

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


@functools.cache
def preload() -> None:
    """Import PRELOAD once in the grading process; forked workers then start with it."""
    for name in PRELOAD:
        with contextlib.suppress(Exception):
            __import__(name)


def default_method() -> str:
    import torch

    return "spawn" if torch.cuda.is_available() else "fork"


# A fresh interpreter in isolated mode (-I: no PYTHONPATH, no user site, no cwd on sys.path),
# told where the kit lives.
_SPAWN = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); from grader.sandbox.worker import main; "
    "main(sys.argv[1:])"
)


class Sandbox:
    """One worker process for one exercise of one submission."""

    def __init__(
        self,
        folder: Path,
        exercise: str,
        *,
        limits: Limits = Limits(),
        method: str | None = None,
        trusted: bool = False,
        package: str = "submission",
    ):
        self.folder = Path(folder)
        self.exercise = exercise
        self.limits = limits
        self.method = method or default_method()
        self.used = 0.0  # seconds spent waiting for the worker: the student's time
        self.user = None if trusted or not limits.drop_privileges else unprivileged_user()
        if self.method == "spawn" and self.user and not _readable_by_others(sys.executable):
            self.user = None  # the interpreter itself is out of reach for `nobody`
        self._uid_lock: int | None = None
        if self.user is not None:
            self.user, self._uid_lock = claim_sandbox_user(self.user)
        self.config = {"folder": str(self.folder), "exercise": exercise, "package": package}
        self._output = tempfile.TemporaryFile()
        self._process: subprocess.Popen | None = None
        self._reaped = False
        self._sock, child = socket.socketpair()
        self.pid = self._start(child)
        child.close()
        self.closed = False

    # -- starting -------------------------------------------------------------------------
    def _start(self, child: socket.socket) -> int:
        if self.method == "fork":
            return self._fork(child)
        return self._spawn(child)

    def _fork(self, child: socket.socket) -> int:
        preload()  # once, in the grading process: every forked worker then starts with them
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        pid = os.fork()
        if pid:
            return pid
        code = 0
        try:  # the child: never returns into the grader's stack
            self._sock.close()
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(self._output.fileno(), 1)
            os.dup2(self._output.fileno(), 2)
            sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
            _close_inherited(child.fileno())
            faulthandler.enable(file=sys.stderr)  # a crash's traceback goes to the capture
            restrict(self.limits, self.user, str(self.folder))
            from . import worker

            worker.serve(child, self.config)
        except BaseException:
            code = 70
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)

    def _spawn(self, child: socket.socket) -> int:
        fd = child.fileno()
        process = subprocess.Popen(
            [sys.executable, "-I", "-c", _SPAWN, str(KIT_ROOT), str(fd), json.dumps(self.config)],
            pass_fds=(fd,),
            stdin=subprocess.DEVNULL,
            stdout=self._output,
            stderr=subprocess.STDOUT,
            cwd=str(self.folder),
            preexec_fn=lambda: restrict(self.limits, self.user, str(self.folder)),
        )
        self._process = process
        return process.pid

    # -- talking --------------------------------------------------------------------------
    def request(self, op: str, **kwargs: Any) -> Any:
        if self.closed:
            raise WorkerLost("the worker was already stopped")
        start = time.monotonic()
        remaining = self.limits.timeout - self.used
        try:
            self._sock.settimeout(max(remaining, 1e-3))  # a stuck worker cannot block a send
            protocol.send(self._sock, {"op": op, "kwargs": kwargs})
            reply = protocol.recv(self._sock, start + remaining)
        except TimeoutError:
            self.used = self.limits.timeout
            self.kill()
            raise WorkerLost(
                f"stopped after {self.limits.timeout:g} s: the time limit for one exercise "
                "(an infinite loop, or very slow code?)"
            ) from None
        except (EOFError, OSError):
            raise WorkerLost(self._death_reason()) from None
        except protocol.ProtocolError as error:
            self.kill()
            raise WorkerLost(f"the worker sent a malformed reply ({error})") from None
        finally:
            self.used += time.monotonic() - start
        if not isinstance(reply, dict):
            self.kill()
            raise WorkerLost("the worker sent a malformed reply")
        if "fatal" in reply:
            self.kill()
            raise WorkerLost(str(reply["fatal"]))
        if reply.get("ok"):
            return reply.get("value")
        info = reply.get("error")
        raise StudentError(info if isinstance(info, dict) else {"type": "Error", "message": ""})

    def _death_reason(self) -> str:
        status = self._wait(timeout=5.0)
        self.kill()
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
        return f"the code ended the worker process (exit code {os.WEXITSTATUS(status)})"

    def _wait(self, timeout: float) -> int | None:
        end = time.monotonic() + timeout
        while True:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return None
            if pid:
                self._reaped = True
                if self._process is not None:
                    self._process.returncode = -1  # reaped here; keeps Popen from waiting
                return status
            if time.monotonic() > end:
                return None
            time.sleep(0.01)

    # -- stopping -------------------------------------------------------------------------
    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signal.SIGKILL)
        if not self._reaped:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self._reaped = True
            if self._process is not None:
                self._process.returncode = -1
        if self._uid_lock is not None and self.user is not None:
            # Processes that escaped the worker's session (setsid, double fork) go too.
            kill_user_processes(self.user.pw_uid)
            os.close(self._uid_lock)
            self._uid_lock = None
        self.closed = True
        self._sock.close()

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(Exception):
                self._sock.settimeout(2.0)
                protocol.send(self._sock, {"op": "exit", "kwargs": {}})
                protocol.recv(self._sock, time.monotonic() + 2.0)
        self.kill()

    def output(self) -> str:
        """What the student's code printed, capped; for the instructor's eyes only."""
        self._output.seek(0)
        data = self._output.read(OUTPUT_CAP + 1)
        text = data[:OUTPUT_CAP].decode("utf-8", "replace")
        return text + ("\n[... output truncated]" if len(data) > OUTPUT_CAP else "")

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        self._output.close()
