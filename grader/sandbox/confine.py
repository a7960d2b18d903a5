"""What confines a worker process: its limits, its user, what it can see and reach.

Everything here but ``Limits`` and the uid bookkeeping runs in the child, after fork and before
any student code: ``restrict`` makes a new session, sets the memory, CPU-time, file-size and
process limits, unshares the network (no interfaces), and, when grading as root, switches to a
sandbox uid of its own after making sure that user can still reach the interpreter.
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
KIT_ROOT = Path(__file__).resolve().parents[2]
CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_PRIVATE, MNT_DETACH = 0x1000, 0x4000, 0x40000, 2
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


# When grading as root, each live worker runs as its own uid, SANDBOX_UID_BASE + n, claimed
# with a lock file, so that no student can signal or read another's worker (parallel batch
# grading) and whatever a worker leaves behind can be found by uid and killed. A uid that
# belongs to a real account is skipped; `nobody` is the fallback when none can be claimed.
SANDBOX_UID_BASE = 64000
SANDBOX_UIDS = 1000
NPROC_LIMIT = 256  # processes and threads one sandbox uid may hold (a fork bomb stops here)


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


def _readable_by_others(path: str) -> bool:
    """Whether every directory on the way to ``path`` lets other users through."""
    current = Path(path).resolve()
    for part in [current, *current.parents]:
        with contextlib.suppress(OSError):
            if part.is_dir() and not os.stat(part).st_mode & 0o001:
                return False
    return True


def restrict(limits: Limits, user: pwd.struct_passwd | None, workdir: str) -> None:
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
