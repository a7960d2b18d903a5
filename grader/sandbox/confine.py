"""What confines a worker: its limits, its user, what it can see and reach.

Everything here but ``Limits`` and the uid bookkeeping runs in the worker's two processes,
after the zygote forks and before any student code (``grader.sandbox.zygote``):

- the *keeper* enters new PID, mount and network namespaces (``enter_namespaces``): as root
  directly, otherwise inside a user namespace where the kernel allows one;
- the *worker*, the first process of the new PID namespace, builds its own view of the files
  (``private_view``): a fresh /proc, a private size-capped /tmp and /dev/shm that vanish with
  it, its submission copy at the same path and nothing else of other students, the kit and the
  answer key hidden under empty directories, the interpreter still reachable; then it takes its
  limits and, when grading as root, a sandbox uid of its own (``restrict``).

When the worker ends, the kernel kills every process left in its PID namespace: nothing it
forked, however it renamed or detached itself, outlives it. This module imports only the
standard library: it is shipped to the zygote as source.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import pwd
import resource
import signal
import socket
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

GiB = 1 << 30
MiB = 1 << 20
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE, MNT_DETACH = 0x20, 0x1000, 0x4000, 0x40000, 2
FILE_CAP = 16 * MiB  # bytes a worker may write to any one file, its captured output included
NPROC_LIMIT = 256  # processes and threads one sandbox uid may hold (a fork bomb stops here)

# Modules a submission may import lazily, imported once in the zygote so every worker starts
# with them (and a worker that runs as another user need not read the interpreter's files).
PRELOAD = (
    "math cmath functools itertools operator typing collections dataclasses fractions "
    "decimal statistics random copy numbers enum abc contextlib warnings string re time "
    "inspect cProfile tracemalloc einops numpy numpy.linalg numpy.fft torch torch.nn "
    "torch.nn.functional torch.overrides torch.utils._python_dispatch encodings.idna"
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
    scratch: int = 64 * MiB  # the size of the worker's private /tmp and of its /dev/shm


# -- sandbox uids (in the grading process) -----------------------------------------------------
# When grading as root, each live worker runs as a uid of its own, SANDBOX_UID_BASE + n,
# claimed with a lock file and released only once its PID namespace is gone, so no student can
# signal, trace or read another's worker. A uid that belongs to a real account is skipped.
SANDBOX_UID_BASE = 64000
SANDBOX_UIDS = 4000
_next_uid = [0]


def unprivileged_user() -> pwd.struct_passwd | None:
    """`nobody` when grading as root (student code must not run as root), else None."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        return None


def claim_sandbox_user(fallback: pwd.struct_passwd) -> tuple[pwd.struct_passwd, int | None]:
    """A uid no live worker on this machine uses, and the lock fd that holds it. The search
    starts past the last uid this process claimed, so a uid is not handed out again at once."""
    folder = Path(tempfile.gettempdir()) / "attention-kit-uids"
    with contextlib.suppress(OSError):
        folder.mkdir(mode=0o700, exist_ok=True)
    start = (_next_uid[0] + os.getpid()) % SANDBOX_UIDS
    for step in range(SANDBOX_UIDS):
        n = (start + step) % SANDBOX_UIDS
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
        kill_user_processes(uid)  # leftovers of a grader that died without namespaces
        _next_uid[0] = n + 1
        user = pwd.struct_passwd(
            ("attention-kit", "x", uid, fallback.pw_gid, "", "/", "/bin/false")
        )
        return user, fd
    return fallback, None


def kill_user_processes(uid: int) -> int:
    """SIGKILL every process owned by ``uid``; how many were signalled. Ownership is read from
    the /proc entry itself, never parsed from text a process controls (its name)."""
    signalled = 0
    for _ in range(10):  # a process may fork while we scan: go again until none is left
        found = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    os.kill(int(entry), signal.SIGKILL)
                    found += 1
        signalled += found
        if not found:
            break
    return signalled


# -- in the keeper: namespaces -----------------------------------------------------------------
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def enter_namespaces(network: bool) -> str:
    """Unshare PID, mount (and network) namespaces for the children of the calling process.
    Returns "root" (real root in them), "user" (root only inside a user namespace) or ""."""
    libc = _libc()
    flags = CLONE_NEWPID | CLONE_NEWNS | (0 if network else CLONE_NEWNET)
    if os.geteuid() == 0 and libc.unshare(flags) == 0:
        return "root"
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWUSER | flags) == 0:
        with contextlib.suppress(OSError):
            Path("/proc/self/setgroups").write_text("deny")
        try:
            Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
            Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
        except OSError:
            return ""
        return "user"
    if not network and libc.unshare(CLONE_NEWNET) != 0:
        block_sockets()
    return ""


def block_sockets() -> None:
    """Fallback where no network namespace can be made: refuse new internet sockets."""
    original = socket.socket

    class NoNetwork(original):  # type: ignore[misc,valid-type]
        def __init__(self, family=-1, *args, **kwargs):
            if family in (socket.AF_INET, socket.AF_INET6):
                raise PermissionError("network access is disabled while grading")
            super().__init__(family, *args, **kwargs)

    socket.socket = NoNetwork  # type: ignore[misc]


# -- in the worker: its own view of the files -------------------------------------------------
def _mount(source: str | bytes | None, target: str | Path, fstype: str | None, flags: int,
           data: str | None = None) -> bool:
    def b(value):
        return value.encode() if isinstance(value, str) else value

    return _libc().mount(b(source), b(str(target)), b(fstype), flags, b(data)) == 0


def _closed(path: Path) -> bool:
    """Whether other users cannot pass through the directory ``path``."""
    try:
        return path.is_dir() and not os.stat(path).st_mode & 0o001
    except OSError:
        return False


def _cover(top: Path, keep: set[str], mode: str = "755") -> None:
    """Put an empty tmpfs over the directory ``top`` and bind back only its children ``keep``.
    Paths stay the same; the rest of ``top`` is out of sight."""
    saved = tempfile.mkdtemp(prefix="attention-kit-mnt-", dir="/tmp")  # the private /tmp
    try:
        if not _mount(str(top), saved, None, MS_BIND | MS_REC):
            return
        if not _mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode},size=64k"):
            return
        for child in sorted(keep):
            source, target = Path(saved) / child, top / child
            if not source.exists():
                continue
            if source.is_dir():
                target.mkdir()
            else:
                target.touch()
            _mount(str(source), target, None, MS_BIND | MS_REC)
    finally:
        _libc().umount2(saved.encode(), MNT_DETACH)
        with contextlib.suppress(OSError):
            os.rmdir(saved)


def _keep_for(top: Path, needed: list[Path]) -> set[str]:
    return {n.relative_to(top).parts[0] for n in needed if n != top and n.is_relative_to(top)}


def private_view(folder: str, hide: list[str], scratch: int, user_visible: bool) -> None:
    """Runs in the worker (PID 1 of its namespace), with mount rights, before any student code.

    ``folder`` (the submission copy) stays at its path; ``hide`` (the kit, the answer key, the
    other students' folders) become empty; /tmp and /dev/shm are fresh tmpfs of ``scratch``
    bytes each; /proc shows this namespace only. ``user_visible``: the worker will run as
    another user, so closed directories on the way to the interpreter are opened up (the rest
    of them stays hidden).
    """
    _mount("none", "/", None, MS_REC | MS_PRIVATE)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    submission = os.open(folder, os.O_PATH | os.O_DIRECTORY)
    for scratch_dir in ("/tmp", "/dev/shm"):
        _mount("tmpfs", scratch_dir, "tmpfs", MS_NOSUID | MS_NODEV,
               f"mode=1777,size={scratch}")
    target = Path(folder)
    if not target.exists():  # it lived under /tmp: put it back at the same path
        target.mkdir(parents=True)
        for parent in [target, *target.parents]:
            if parent.is_relative_to("/tmp") and parent != Path("/tmp"):
                os.chmod(parent, 0o755)
    _mount(f"/proc/self/fd/{submission}", target, None, MS_BIND | MS_REC)
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)  # read, never filled up
    os.close(submission)
    needed = [Path(p).resolve() for p in {sys.prefix, sys.base_prefix, *sys.path}
              if p and Path(p).exists()]
    tops: dict[Path, set[str]] = {}
    for path in hide:
        top = Path(path).resolve()
        if top.is_dir() and not top.is_relative_to("/tmp"):  # /tmp is private already
            tops[top] = _keep_for(top, [*needed, target])
    if user_visible:
        for path in needed:
            for part in reversed([path, *path.parents]):
                if _closed(part) and part != path:
                    tops.setdefault(part, set()).update(_keep_for(part, needed))
                    break
    for top in sorted(tops, key=lambda p: len(p.parts)):
        if top.exists():
            _cover(top, tops[top])


# -- in the worker: limits and user -------------------------------------------------------------
def restrict(limits: Limits, user: tuple[int, int] | None, workdir: str) -> None:
    """Runs in the worker before any student code: its own session, memory, CPU-time,
    file-size and process limits, then the sandbox uid (as root)."""
    with contextlib.suppress(OSError):
        os.setsid()
    cap = _data_size() + limits.memory
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    cpu = int(limits.timeout * 2) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_CAP, FILE_CAP))  # output and any file
    if user is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (NPROC_LIMIT, NPROC_LIMIT))
        os.setgroups([])
        os.setgid(user[1])
        os.setuid(user[0])
    os.environ.clear()
    os.environ.update({"HOME": workdir, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    os.chdir(workdir)


def close_inherited(keep: tuple[int, ...]) -> None:
    """Close every descriptor but stdio and ``keep``, so the student's code cannot reach the
    grader's files, sockets or other workers."""
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    limit = limit if 0 < limit < (1 << 20) else 65536
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, limit)


def _data_size() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0
