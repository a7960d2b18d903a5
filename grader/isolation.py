"""Running a submission's code in a worker process, under limits.

``Sandbox`` starts a worker (``grader.worker``) for one exercise of one submission and turns
its replies into values, ``StudentError`` (the student's code raised) or ``WorkerLost`` (the
worker crashed, hung, exited, ran out of memory or broke the protocol: the exercise is over).

Start methods: ``fork`` (the default without CUDA: the worker starts with NumPy and torch
already imported) and ``spawn`` (a fresh interpreter; used when CUDA is available, because a
CUDA context does not survive fork).

In the worker, before any student code runs: a new session (so the whole process group can be
killed), stdin from /dev/null and stdout/stderr to a capped capture file, an address-space
limit, a CPU-time backstop, a private network namespace with no interfaces where the kernel
allows it, and, when grading as root, the unprivileged ``nobody`` user.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import fcntl
import functools
import json
import os
import pwd
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import protocol

GiB = 1 << 30
KIT_ROOT = Path(__file__).resolve().parent.parent
CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_PRIVATE, MNT_DETACH = 0x1000, 0x4000, 0x40000, 2
OUTPUT_CAP = 4096  # characters of captured output kept for the instructor
FILE_CAP = 16 << 20  # bytes a worker may write to any one file, its captured output included

# Stdlib modules a submission may import lazily. They are imported before privileges drop,
# since an unprivileged user may not be able to read the interpreter's own files.
PRELOAD = (
    "math cmath functools itertools operator typing collections dataclasses fractions "
    "decimal statistics random copy numbers enum abc contextlib warnings string re time "
    "inspect cProfile einops numpy.linalg numpy.fft torch torch.nn torch.nn.functional "
    "encodings.idna"
    # torch's first backward() imports this (and SymPy, mpmath) lazily
    " torch.fx.experimental.symbolic_shapes"
).split()


@dataclass(frozen=True)
class Limits:
    # Wall seconds the worker may take over one exercise, loading included; only time spent
    # waiting for the worker counts, not the grader's own work between requests.
    timeout: float = 60.0
    memory: int = 4 * GiB  # bytes a worker may allocate beyond its start-up footprint
    network: bool = False
    drop_privileges: bool = True  # only has an effect when grading as root


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


# When grading as root, each live worker runs as its own uid, SANDBOX_UID_BASE + n, claimed
# with a lock file, so that no student can signal or read another's worker (parallel batch
# grading) and whatever a worker leaves behind can be found by uid and killed. A uid that
# belongs to a real account is skipped; `nobody` is the fallback when none can be claimed.
SANDBOX_UID_BASE = 64000
SANDBOX_UIDS = 1000
NPROC_LIMIT = 256  # processes and threads one sandbox uid may hold (a fork bomb stops here)


@functools.cache
def _preload() -> None:
    for name in PRELOAD:
        with contextlib.suppress(Exception):
            __import__(name)


def unprivileged_user() -> pwd.struct_passwd | None:
    """`nobody` when grading as root (student code must not run as root), else None."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        return None


def claim_sandbox_user(fallback: pwd.struct_passwd) -> tuple[pwd.struct_passwd, int | None]:
    """A uid no other live worker on this machine uses, and the lock fd that holds it."""
    folder = Path(tempfile.gettempdir()) / "attention-kit-uids"
    with contextlib.suppress(OSError):
        folder.mkdir(mode=0o700, exist_ok=True)
    for n in range(SANDBOX_UIDS):
        uid = SANDBOX_UID_BASE + n
        try:
            pwd.getpwuid(uid)
            continue  # a real account
        except KeyError:
            pass
        try:
            fd = os.open(folder / f"{uid}.lock", os.O_CREAT | os.O_RDWR, 0o600)
        except OSError:
            break
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        kill_user_processes(uid)  # leftovers of a grader that died before sweeping
        user = pwd.struct_passwd(
            ("attention-kit", "x", uid, fallback.pw_gid, "", "/", "/bin/false")
        )
        return user, fd
    return fallback, None


def kill_user_processes(uid: int) -> int:
    """SIGKILL every process whose real uid is ``uid`` (what a worker left behind). Returns how
    many were signalled. Only ever called for a dedicated sandbox uid, never for `nobody`."""
    signalled = 0
    for _ in range(10):  # a process may fork while we scan: go again until none is left
        found = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{entry}/status") as status:
                    for line in status:
                        if line.startswith("Uid:"):
                            if int(line.split()[1]) == uid:
                                os.kill(int(entry), signal.SIGKILL)
                                found += 1
                            break
        signalled += found
        if not found:
            break
    return signalled


def _close_inherited(keep: int) -> None:
    """Close every descriptor a forked worker inherited except stdio and its socket, so the
    student's code cannot write to the grader's terminal, files or other workers' sockets."""
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    limit = limit if 0 < limit < (1 << 20) else 65536
    os.closerange(3, keep)
    os.closerange(keep + 1, limit)


def default_method() -> str:
    import torch

    return "spawn" if torch.cuda.is_available() else "fork"


def _readable_by_others(path: str) -> bool:
    """Whether every directory on the way to ``path`` lets other users through."""
    current = Path(path).resolve()
    for part in [current, *current.parents]:
        with contextlib.suppress(OSError):
            if part.is_dir() and not os.stat(part).st_mode & 0o001:
                return False
    return True


def _restrict(limits: Limits, user: pwd.struct_passwd | None, workdir: str) -> None:
    """Runs in the child, before any student code."""
    os.setsid()
    data = _data_size()
    cap = data + limits.memory
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    cpu = int(limits.timeout * 2) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_CAP, FILE_CAP))  # output and any file
    if not limits.network:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWNET) != 0:
            _block_sockets()
    if user is not None:
        _expose_interpreter()
        resource.setrlimit(resource.RLIMIT_NPROC, (NPROC_LIMIT, NPROC_LIMIT))
        os.setgroups([])
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)
        os.environ["HOME"] = workdir
    os.chdir(workdir)


def _closed_ancestor(path: str) -> Path | None:
    """The highest directory on the way to ``path`` that other users cannot pass through."""
    current = Path(path).resolve()
    for part in reversed([current, *current.parents]):
        with contextlib.suppress(OSError):
            if part.is_dir() and not os.stat(part).st_mode & 0o001:
                return part
    return None


def _expose_interpreter() -> None:
    """Let the unprivileged worker reach the interpreter, its libraries and the kit.

    Python (or the virtual environment, or the kit) may live under a directory that only its
    owner may enter, such as /root. Then the worker, once it is ``nobody``, could not import a
    module that was not loaded before: a correct submission that happens to trigger a lazy
    import would fail. In a private mount namespace, each such directory is covered by an empty
    tmpfs into which only the subtrees needed are bind-mounted back, so paths stay the same and
    the rest of that directory stays out of sight. Best effort: where mount namespaces are not
    allowed, nothing changes and the modules imported before the fork (PRELOAD) still work.
    """
    needed = {KIT_ROOT, Path(sys.prefix), Path(sys.base_prefix)}
    needed.update(Path(p) for p in sys.path if p and Path(p).exists())
    closed: dict[Path, set[str]] = {}
    for path in needed:
        top = _closed_ancestor(str(path))
        resolved = path.resolve()
        if top is not None and resolved != top:
            closed.setdefault(top, set()).add(resolved.relative_to(top).parts[0])
    if not closed:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        return
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return
    for top, children in closed.items():
        saved = tempfile.mkdtemp(prefix="attention-kit-mnt-")
        try:
            if libc.mount(bytes(top), saved.encode(), None, MS_BIND | MS_REC, None) != 0:
                continue
            if libc.mount(b"tmpfs", bytes(top), b"tmpfs", 0, b"mode=755") != 0:
                continue
            ok = True
            for child in sorted(children):
                target = top / child
                source = Path(saved) / child
                if source.is_dir():
                    target.mkdir()
                else:
                    target.touch()
                ok &= libc.mount(bytes(source), bytes(target), None, MS_BIND | MS_REC, None) == 0
            if not ok:
                libc.umount2(bytes(top), MNT_DETACH)
        finally:
            libc.umount2(saved.encode(), MNT_DETACH)
            with contextlib.suppress(OSError):
                os.rmdir(saved)


def _block_sockets() -> None:
    """Fallback where no network namespace can be made: refuse new internet sockets."""
    original = socket.socket

    class NoNetwork(original):  # type: ignore[misc,valid-type]
        def __init__(self, family=-1, *args, **kwargs):
            if family in (socket.AF_INET, socket.AF_INET6):
                raise PermissionError("network access is disabled while grading")
            super().__init__(family, *args, **kwargs)

    socket.socket = NoNetwork  # type: ignore[misc]


def _data_size() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


# A fresh interpreter in isolated mode (-I: no PYTHONPATH, no user site, no cwd on sys.path),
# told where the kit lives.
_SPAWN = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); from grader.worker import main; "
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
        _preload()  # once, in the grading process: every forked worker then starts with them
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
            _restrict(self.limits, self.user, str(self.folder))
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
            preexec_fn=lambda: _restrict(self.limits, self.user, str(self.folder)),
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
