"""Running a submission's code in a worker process, under limits (the grading side).

``Sandbox`` asks the zygote (``grader.sandbox.zygote``) for a worker that loads one exercise of
one submission, and turns its replies into values, ``StudentError`` (the student's code raised)
or ``WorkerLost`` (the worker crashed, hung, exited, ran out of memory, broke a rule or sent
something that is not a reply to the request: the exercise is over, the grade goes on).

Every request carries a number that its reply must echo, and nothing may follow a reply: a
forged, extra or unreadable frame ends the exercise with "the worker sent a malformed reply".
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import cgroups, protocol
from .confine import (  # noqa: F401  (GiB, Limits, unprivileged_user: re-exported)
    PACKAGES,
    GiB,
    Limits,
    claim_sandbox_user,
    kill_user_processes,
    unprivileged_user,
)
from .zygote import BOOT, EXIT_FORBIDDEN, SOURCES, request_bytes

OUTPUT_CAP = 4096  # characters of captured output kept for the instructor
TRUNCATED = "\n[... output truncated]"
SANDBOX = Path(__file__).resolve().parent
MALFORMED = "the worker sent a malformed reply"
FORBIDDEN = ("it called one of torch's own attention implementations "
             "(F.scaled_dot_product_attention, F.multi_head_attention_forward, "
             "nn.MultiheadAttention or a Transformer layer), and the exercise is to write "
             "attention, so it may not")
FRAMEWORKS = ("numpy", "torch")


CONTROL = dict.fromkeys([*range(0, 9), *range(11, 32), 127, *range(128, 160)], "?")


def printable(text: Any, cap: int) -> str:
    """Student-made text as it may be shown: one line (its line breaks as `` / ``, so it cannot
    pass for a line of a report), at most ``cap`` characters, no control characters (an
    escape sequence cannot redraw the instructor's terminal), and nothing a UTF-8 file cannot
    hold (a lone surrogate is written as its escape)."""
    text = " / ".join(line.strip() for line in str(text).splitlines() if line.strip())
    text = (text[:cap] + " [...]" if len(text) > cap else text).translate(CONTROL)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class StudentError(Exception):
    """The student's code raised an exception (or returned something unusable)."""

    def __init__(self, info: dict[str, Any]):
        where = info.get("where")
        self.info = {**info, "type": printable(info.get("type"), 100),
                     "message": printable(info.get("message"), 1000),
                     "where": [printable(w, 300) for w in where[-3:]]
                     if isinstance(where, list) else []}
        super().__init__(f"{self.info['type']}: {self.info['message']}")

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
        if where:  # an error of autograd's engine: the forward line whose gradient failed
            how = "in the backward pass of" if self.info.get("backward") is True else "at"
            text += f" ({how} {where[-1]})"
        return text


class WorkerLost(BaseException):
    """The worker can answer no more; the exercise scores zero with ``reason``.

    A BaseException, so that Hypothesis stops at once instead of shrinking on it.
    """

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


# -- the zygote ------------------------------------------------------------------------------
class Zygote:
    """The clean process every worker of one framework is forked from; one per framework and
    grading run, shared by the processes a batch forks (each connects on its own)."""

    def __init__(self, framework: str = "torch") -> None:
        if framework not in FRAMEWORKS:
            raise ValueError(f"no zygote for framework {framework!r}")
        self.framework = framework
        self.folder = tempfile.mkdtemp(prefix="attention-kit-zygote-")  # 0700: root's alone
        self.path = os.path.join(self.folder, "socket")
        self.owner = os.getpid()
        self.mounts = _mount_namespace()
        sources = {name: (SANDBOX / f"{name}.py").read_text() for name in SOURCES}
        self.log = tempfile.TemporaryFile()
        # A small, fixed environment: what the grading process was started with (a course
        # secret, tokens) must not sit in the workers' memory.
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/",
               "PYTORCH_NVML_BASED_CUDA_CHECK": "1", "OMP_NUM_THREADS": "1",
               **{k: v for k, v in os.environ.items()
                  if k in ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH") or k.startswith("NVIDIA_")}}
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-c", BOOT, self.path, framework], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, cwd="/", env=env,
        )
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(sources).encode() + b"\n")
        self.process.stdin.flush()
        self._ready = False
        self._connections: dict[int, socket.socket] = {}

    def alive(self) -> bool:
        if os.getpid() == self.owner:
            return self.process.poll() is None
        try:  # a forked child cannot wait for its parent's child: ask the kernel instead
            os.kill(self.process.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def wait_ready(self) -> None:
        if self._ready:
            return
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line != b"ready\n":
            self.log.seek(0)
            tail = self.log.read()[-2000:].decode("utf-8", "replace")
            raise RuntimeError(f"the worker zygote did not start:\n{tail}")
        self._ready = True

    def connection(self) -> socket.socket:
        pid = os.getpid()
        if pid not in self._connections:
            self.wait_ready() if pid == self.owner else None
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            for _ in range(600):  # a forked grader may ask before the zygote is listening
                try:
                    sock.connect(self.path)
                    break
                except (FileNotFoundError, ConnectionRefusedError):
                    time.sleep(0.05)
            self._connections[pid] = sock
        return self._connections[pid]

    def spawn(self, request: dict[str, Any], fds: list[int]) -> None:
        sock = self.connection()
        data = request_bytes(request)
        sock.sendall(data[:8])
        socket.send_fds(sock, [data[8:]], fds)
        reply = protocol.recv(sock)
        if not reply.get("ok"):
            raise RuntimeError(f"the zygote refused a worker: {reply.get('error')}")

    def close(self) -> None:
        for sock in self._connections.values():
            sock.close()
        self._connections.clear()
        if os.getpid() != self.owner:
            return
        with contextlib.suppress(Exception):
            self.process.stdin.close()  # the zygote ends on end of input
            self.process.wait(timeout=5)
        with contextlib.suppress(Exception):
            self.process.kill()
        for stream in (self.process.stdout, self.log):
            with contextlib.suppress(Exception):
                stream.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
            os.rmdir(self.folder)


_ZYGOTES: dict[str, Zygote] = {}


def _mount_namespace() -> str:
    with contextlib.suppress(OSError):
        return os.readlink("/proc/self/ns/mnt")
    return ""


def zygote(framework: str = "torch") -> Zygote:
    """This run's zygote for ``framework``, started on first use. A forked child shares its
    parent's, unless it has since entered a mount namespace of its own (to hide a course
    folder, say): workers must see what their grading process sees, not what its parent
    saw."""
    found = _ZYGOTES.get(framework)
    if found is None or not found.alive() or found.mounts != _mount_namespace():
        found = _ZYGOTES[framework] = Zygote(framework)
        atexit.register(found.close)
    return found


def start_zygote() -> None:
    """Start the zygotes now, so their imports overlap with the grading process's own."""
    for framework in FRAMEWORKS:
        zygote(framework)




# -- one worker --------------------------------------------------------------------------------
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
        self.used = 0.0  # seconds spent waiting for the worker: the student's time
        self.closed = False
        self.pid: int | None = None
        self.mode = ""
        self._status_text = b""
        self._exit: int | None = None
        self._sequence = 0
        user = None if trusted or not limits.drop_privileges else unprivileged_user()
        self._uid_lock: int | None = None
        if user is not None:
            user, self._uid_lock = claim_sandbox_user(user)
        self.user = user
        self.config = {"folder": str(self.folder), "exercise": exercise, "package": package}
        # Made by this process, joined by the keeper before it forks: the kernel's limits.
        self.group = cgroups.worker_group(limits.memory, limits.processes)
        self._output = tempfile.TemporaryFile()
        self._sock, child = socket.socketpair()
        self._status, status_child = socket.socketpair()
        try:
            zygote(framework).spawn(
                {"config": self.config, "confine": {
                    "timeout": limits.timeout, "memory": limits.memory,
                    "network": limits.network, "scratch": limits.scratch,
                    "processes": limits.processes,
                    "cgroups": self.group.procs if self.group is not None else [],
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
        if self.closed:
            raise WorkerLost("the worker was already stopped")
        start = time.monotonic()
        remaining = self.limits.timeout - self.used
        self._sequence += 1
        try:
            self._sock.settimeout(max(remaining, 1e-3))  # a stuck worker cannot block a send
            protocol.send(self._sock, {"op": op, "id": self._sequence, "kwargs": kwargs})
            reply = protocol.recv(self._sock, start + remaining)
            while self._is_question(reply):  # a proxy asks: its time is the student's
                protocol.send(self._sock, {**self.answer(reply), "id": self._sequence})
                reply = protocol.recv(self._sock, start + remaining)
            extra = self._pending()
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
            self.used += time.monotonic() - start
        if extra or not isinstance(reply, dict) or reply.get("id") != self._sequence:
            self.kill()
            raise WorkerLost(MALFORMED)
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
        process limit of 1), for a measure of its memory that nothing escapes."""
        limits = replace(self.limits, processes=1) if single else self.limits
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
            if self.group is not None:
                self.group.remove()
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
        """What the student's code printed, capped; for the instructor's eyes only."""
        self._output.seek(0)
        data = self._output.read(OUTPUT_CAP + 1)
        text = data[:OUTPUT_CAP].decode("utf-8", "replace").translate(
            {k: v for k, v in CONTROL.items() if k not in (9,)})
        return text + (TRUNCATED if len(data) > OUTPUT_CAP else "")

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        self._output.close()
