"""What confines a worker: its limits, its user, what it can see and reach.

Everything here but ``Limits`` and the uid bookkeeping runs in the worker's two processes,
after the zygote forks and before any student code (``grader.sandbox.zygote``):

- the *keeper* enters new PID, mount and network namespaces (``enter_namespaces``): as root
  directly, otherwise inside a user namespace where the kernel allows one;
- their *init*, the first process of the new PID namespace, builds the worker's view of the
  files (``grader.sandbox.mounts``, split from this module: ``mounts.private_view``): a new
  root that holds the system's libraries, the interpreter and its packages, the devices, a
  fresh /proc, a private size-capped /tmp and /dev/shm, and the submission copy at its path,
  all read-only but the scratch space; nothing else (the kit, the answer key, other students'
  folders, /home, /var/tmp) is there at all;
- the *worker* takes its limits and, when grading as root, a sandbox uid of its own, or, in a
  user namespace, loses the capabilities init needed (``restrict``, with ``bounds`` where no
  control group holds it), installs the seccomp filter (``seccomp``: the system calls an
  honest worker makes, and no other), then runs the student's code.

When the worker ends, init ends, and the kernel kills every process left in the namespace:
nothing it forked, however it renamed or detached itself, outlives it; its SysV memory goes
with its IPC namespace. This module imports only the standard library: it is shipped to the
zygote as source.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import os
import pwd
import resource
import signal
import socket
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from . import bounds, seccomp

GiB = 1 << 30
MiB = 1 << 20
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC = 0x20000000, 0x40000000, 0x08000000
FILE_CAP = 16 * MiB  # bytes a worker may write to any one file, its captured output included
NPROC_LIMIT = 64  # processes and threads one worker may hold (a fork bomb stops here)
KIT_PROCESSES = 2  # a worker's keeper and init, counted with it in its user namespace

# Modules imported once in each zygote, so every worker starts with them (and a worker that
# runs as another user need not read the interpreter's files). The NumPy zygote never imports
# torch: a NumPy exercise's worker holds nothing of it to find.
_STANDARD = (
    "math cmath functools itertools typing collections dataclasses fractions decimal "
    "statistics random copy numbers enum abc contextlib warnings string re time "
    "__future__ encodings.idna numpy numpy.linalg numpy.fft"
).split()
PRELOAD = {
    "numpy": _STANDARD,
    # Not torch.fx's symbolic shapes (0.6 s, with SymPy): the worker's backward pass does
    # without them (``operation_helpers.run_backward``)
    "torch": [*_STANDARD, "torch", "torch.nn", "torch.nn.functional"],
}


@dataclass(frozen=True)
class Limits:
    # Wall seconds the worker may take over one exercise, loading included; only time spent
    # waiting for the worker counts, not the grader's own work between requests, nor a call
    # stopped at its own limit (``call``: its check fails, with its input).
    timeout: float = 60.0
    # CPU seconds one call may take (loading the file is a call): a call past it ends at once,
    # the check it belongs to fails, and the exercise goes on in a fresh worker. A torch
    # worker's calls get TORCH_CALLS times it (``Sandbox.call_seconds``). Every call of the
    # answer key takes under a tenth of its limit (tests/test_call_limit.py). Wall seconds are
    # bounded too, at CALL_WALL times the limit (a call that sleeps uses no CPU). 0: none.
    call: float = 2.0
    memory: int = 4 * GiB  # bytes a worker may allocate beyond its start-up footprint
    network: bool = False
    drop_privileges: bool = True  # only has an effect when grading as root
    scratch: int = 64 * MiB  # the size of the worker's private /tmp and of its /dev/shm
    # Processes and threads the worker's sandbox uid may hold (as root): 1 for a worker whose
    # memory is measured, so no process of its own escapes the measure.
    processes: int = NPROC_LIMIT


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
        if not _mapped(uid):  # root of a user namespace (a Kubernetes pod's: 65536 uids)
            continue
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


@functools.cache
def _uid_ranges() -> tuple[tuple[int, int], ...]:
    """The uids this process's user namespace maps (``/proc/self/uid_map``: all of them in the
    machine's own)."""
    ranges = []
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/uid_map").read_text().splitlines():
            inside, _, count = map(int, line.split())
            ranges.append((inside, inside + count))
    return tuple(ranges) or ((0, 1 << 32),)


def _mapped(uid: int) -> bool:
    return any(low <= uid < high for low, high in _uid_ranges())


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
@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)  # made once: each CDLL builds a class of its own


# What the kernel counts per user in each user namespace, and in every namespace above it too:
# a worker in a user namespace of its own, as the grading user, would hold the user's own share
# (as uid 65534, a worker held all 128 inotify instances, and the user's other programs got
# "Too many open files" until it ended). A worker needs none of them, nor a user namespace of
# its own (which the seccomp filter refuses too: ``seccomp``).
USER_NAMESPACE_NONE = ("max_inotify_instances", "max_inotify_watches", "max_fanotify_groups",
                       "max_fanotify_marks", "max_user_namespaces")


def enter_namespaces(network: bool) -> str:
    """Unshare PID, mount (and network) namespaces for the children of the calling process;
    in a user namespace, none of ``USER_NAMESPACE_NONE`` left to them. Returns "root" (real
    root in them), "user" (root only inside a user namespace) or ""."""
    libc = _libc()
    flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | (0 if network else CLONE_NEWNET)
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
        for name in USER_NAMESPACE_NONE:
            with contextlib.suppress(OSError):  # an older kernel may not count it
                Path(f"/proc/sys/user/{name}").write_text("0")
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


# -- in the worker: limits and user -------------------------------------------------------------
def restrict(limits: Limits, user: tuple[int, int] | None, workdir: str, *, mode: str = "",
             grouped: Iterable[str] = ()) -> None:
    """Runs in the worker before any student code: its own session, memory, CPU-time,
    file-size and process limits, then the sandbox uid (as root) or no capability at all (in a
    user namespace), and last the seccomp filter (``seccomp``). ``mode``: its namespaces
    (``enter_namespaces``); ``grouped``: the controllers of its control group, whose limits
    then need no rlimit (``bounds``)."""
    grouped = set(grouped)
    with contextlib.suppress(OSError):
        os.setsid()
    cap = _data_size() + limits.memory
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    if "memory" not in grouped:
        bounds.cap_memory(limits.memory)
    cpu = int(limits.timeout * 2) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_CAP, FILE_CAP))  # output and any file
    bounds.first_for_the_oom_killer()
    if user is not None:  # root: a uid of its own, whose processes are this worker's alone
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
        os.setgroups([])
        os.setgid(user[1])
        os.setuid(user[0])
    elif mode == "user":
        # Its user namespace counts its own processes (kernel 5.14+), its keeper and init too.
        processes = limits.processes + KIT_PROCESSES
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
        bounds.drop_capabilities()
    # The grading process's session keyring is not the worker's (``bounds``); where no filter
    # follows, nothing else keeps its keys from the worker.
    try:
        bounds.own_session_keyring()
    except OSError:
        if not seccomp.supported():
            raise
    os.environ.clear()
    os.environ.update({"HOME": workdir, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    os.chdir(workdir)
    # Last: nothing above is a call the filter must allow. Where the architecture is not one
    # it knows, the node's check says the workers are not isolated (``node.namespaces``).
    if seccomp.supported():
        seccomp.install()


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
