"""What confines a worker: its limits, its user, what it can see and reach.

Everything here but ``Limits`` and the uid bookkeeping runs in the worker's two processes,
after the zygote forks and before any student code (``grader.sandbox.zygote``):

- the *keeper* enters new PID, mount and network namespaces (``enter_namespaces``): as root
  directly, otherwise inside a user namespace where the kernel allows one;
- their *init*, the first process of the new PID namespace, builds the worker's view of the
  files (``private_view``): a new root that holds the system's libraries, the interpreter and
  its packages, the devices, a fresh /proc, a private size-capped /tmp and /dev/shm, and the
  submission copy at its path, all read-only but the scratch space; nothing else (the kit,
  the answer key, other students' folders, /home, /var/tmp) is there at all;
- the *worker* takes its limits and, when grading as root, a sandbox uid of its own, or, in a
  user namespace, loses the capabilities init needed (``restrict``, with ``bounds`` where no
  control group holds it), then runs the student's code.

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
import glob
import os
import pwd
import resource
import signal
import socket
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from . import bounds

GiB = 1 << 30
MiB = 1 << 20
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC = 0x20000000, 0x40000000, 0x08000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE, MNT_DETACH = 0x20, 0x1000, 0x4000, 0x40000, 2
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
    # without them (``worker.run_backward``)
    "torch": [*_STANDARD, "torch", "torch.nn", "torch.nn.functional"],
}
# What a worker's root shows of the interpreter's installed packages: NumPy's worker only
# NumPy (every other entry of every site-packages folder, torch, scipy, jax and the kit's own
# editable finder included, is absent); torch's worker all of them (torch imports many).
PACKAGES = {"numpy": ("numpy",), "torch": None}
SITE_NAMES = ("site-packages", "dist-packages")


SITE_PATTERNS = ("lib/python3*/site-packages", "lib/python3*/dist-packages",
                 "lib/python3/dist-packages", "local/lib/python3*/dist-packages",
                 "local/lib/python3*/site-packages", "lib64/python3*/site-packages")


def site_folders(paths: Iterable[str]) -> list[str]:
    """The site-packages and dist-packages folders in or under ``paths`` (where an interpreter
    or a prefix keeps them: ``lib/python3.11/site-packages``, ``local/lib/python3/...``)."""
    found = set()
    for path in paths:
        if os.path.basename(path) in SITE_NAMES:
            found.add(path)
        for pattern in SITE_PATTERNS:
            found.update(glob.glob(os.path.join(path, pattern)))
    return sorted(p for p in found if os.path.isdir(p) and not os.path.islink(p))


_PACKAGED: dict[tuple[str, ...], dict[str, list[str]]] = {}


def packaged(packages: tuple[str, ...]) -> dict[str, list[str]]:
    """Each site folder a worker's root shows, with the entries of it that make up
    ``packages``. Read once (the zygote reads it before it forks: ``zygote.preload``)."""
    if packages not in _PACKAGED:
        _PACKAGED[packages] = {site: kept_entries(site, packages)
                               for site in site_folders(_folders_to_show())}
    return _PACKAGED[packages]


def kept_entries(site: str, packages: tuple[str, ...]) -> list[str]:
    """The entries of ``site`` that make up ``packages``: their folders, single-file modules,
    dist-info and bundled libraries (``numpy.libs``)."""
    kept = []
    with contextlib.suppress(OSError):
        for item in sorted(os.listdir(site)):
            stem = item.split("-")[0].split(".")[0]
            if stem in packages:
                kept.append(item)
    return kept


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
# its own (which the seccomp filter refuses too, where it runs: ``bounds``).
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


# -- in the worker: its own view of the files -------------------------------------------------
# What a worker sees of the machine: the system's programs and libraries, the interpreter and
# its packages, the devices, and its own submission. Nothing else is listed, so nothing else
# is there: not the kit, the answer key, other students' folders, /home, /var/tmp or /work.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys")
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217}


def _mount(source: str | bytes | None, target: str | Path, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    def b(value):
        return value.encode() if isinstance(value, str) else value

    libc = _libc()
    if libc.mount(b(source), b(str(target)), b(fstype), flags, b(data)) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"mount {source} on {target}: {os.strerror(error)}")


def _bind(source: str, target: Path, *, writable: bool = False) -> None:
    _mount(source, target, None, MS_BIND | MS_REC)
    if not writable:
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)


@functools.cache
def visible_paths() -> tuple[str, ...]:
    """The host paths a worker needs: the system's, and the interpreter's with its packages.
    Worked out once per process, as ``packaged`` is (the zygote, before it forks)."""
    wanted = {*SYSTEM, sys.prefix, sys.base_prefix, os.path.dirname(sys.executable),
              *(p for p in sys.path if p)}
    found = []
    for path in sorted(wanted):
        if os.path.lexists(path):
            found.append(os.path.abspath(path))
    return tuple(found)


@functools.cache
def _folders_to_show() -> tuple[str, ...]:
    """``visible_paths()``'s real folders, less those inside another one: each is bound once."""
    folders = [p for p in visible_paths() if os.path.isdir(p) and not os.path.islink(p)]
    return tuple(p for p in folders
                 if not any(Path(p).is_relative_to(other) and p != other for other in folders))


# Files, folders and links a worker's /tmp, and its /dev/shm, may hold. Each is kernel memory
# that the mount's size= does not count, and so are the extended attributes a file may carry
# (user.* on tmpfs, Linux 6.6+), which the kernel bounds by this count (1 KiB an entry): with
# the default, half the machine's pages, one worker stored 800 MiB of attributes in 2 s in a
# /dev/shm of 64 MiB, with --memory 0.25 GiB and a VmRSS of 23 MiB.
SCRATCH_INODES = 4096


def scratch_options(scratch: int) -> str:
    """The mount options of a worker's /tmp and /dev/shm: ``scratch`` bytes, ``SCRATCH_INODES``
    entries."""
    return f"mode=1777,size={scratch},nr_inodes={SCRATCH_INODES}"


def private_view(folder: str, scratch: int, packages: list[str] | None = None) -> None:
    """Runs in the worker (PID 1 of its namespaces), with mount rights, before any student code:
    a new root holding only ``visible_paths()`` (read-only), the devices, a fresh /proc of this
    namespace (read-only), a private /tmp and /dev/shm of ``scratch`` bytes each
    (``scratch_options``), and ``folder`` (the submission copy, read-only, at the same path).
    With ``packages``, every site-packages folder in it holds those packages and nothing else.
    The host's root is then detached."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    # Held open before /tmp is covered below: the interpreter, its packages (a virtual
    # environment may live under /tmp) and the submission are bound from these handles.
    shown = {path: os.open(path, os.O_PATH | os.O_DIRECTORY) for path in _folders_to_show()}
    sites = {} if packages is None else {
        site: {item: os.open(os.path.join(site, item), os.O_PATH) for item in items}
        for site, items in packaged(tuple(packages)).items()}
    submission = os.open(folder, os.O_PATH | os.O_DIRECTORY)
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=700,size=1m")  # ours alone
    root = Path("/tmp/root")
    root.mkdir()
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m")
    (root / "tmp").mkdir()
    _mount("tmpfs", root / "tmp", "tmpfs", MS_NOSUID | MS_NODEV, scratch_options(scratch))
    for path in visible_paths():
        if os.path.islink(path):  # /lib -> usr/lib: the same link, its target is listed too
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            if not os.path.lexists(target):
                os.symlink(os.readlink(path), target)
    for path, handle in shown.items():
        target = root / path.lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        _bind(f"/proc/self/fd/{handle}", target)
        os.close(handle)
    for site, entries in sites.items():  # only the allowed packages: the rest is not there
        target = root / site.lstrip("/")
        _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=755")
        for item, handle in entries.items():
            place = target / item
            if os.path.isdir(f"/proc/self/fd/{handle}"):
                place.mkdir()
            else:
                place.touch()
            _bind(f"/proc/self/fd/{handle}", place)
            os.close(handle)
        _mount(None, target, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    cgroup = root / "sys" / "fs" / "cgroup"
    if cgroup.is_dir():  # the kernel's accounts of every group, the student's own included:
        _mount("tmpfs", cgroup, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=555")
        # an empty folder, so no peak or count can carry a value from one worker to the next
    _devices(root / "dev", scratch)
    (root / "proc").mkdir()
    # Read-only: no process of the worker's lowers its score for the out-of-memory killer
    # (``bounds``), which its init set before this; what a worker reads there is unchanged.
    _mount("proc", root / "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY)
    target = root / folder.lstrip("/")
    target.mkdir(parents=True, exist_ok=True)
    _bind(f"/proc/self/fd/{submission}", target)  # read, never filled up
    os.close(submission)
    _mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    _pivot_root(root)


# The devices a worker's /dev holds, bound one by one from the machine's, where present: not
# the whole of /dev, where the terminals (/dev/pts) of the user grading would be open to a
# worker that runs as that user, and the system's log socket with them.
DEVICES = ("null", "zero", "full", "random", "urandom")
ACCELERATORS = ("nvidia*", "dri", "kfd")


def _devices(dev: Path, scratch: int) -> None:
    dev.mkdir()
    _mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=755,size=64k")
    found = [f"/dev/{name}" for name in DEVICES if os.path.exists(f"/dev/{name}")]
    for pattern in ACCELERATORS:
        found += sorted(glob.glob(f"/dev/{pattern}"))
    for source in found:
        target = dev / os.path.basename(source)
        if os.path.isdir(source):
            target.mkdir()
        else:
            target.touch()
        _bind(source, target, writable=True)
    for name, link in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                       ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(link, dev / name)
    (dev / "shm").mkdir()
    _mount("tmpfs", dev / "shm", "tmpfs", MS_NOSUID | MS_NODEV, scratch_options(scratch))
    _mount(None, dev, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def seal_proc(pid: int) -> None:
    """Runs in init, after it forked the worker ``pid`` and before the worker goes on: the
    worker cannot write its own ``/proc/PID/clear_refs`` (where a process resets the peak
    memory the grading process reads, ``VmHWM``), which is covered by a read-only empty file."""
    with contextlib.suppress(OSError):
        _mount("/dev/null", f"/proc/{pid}/clear_refs", None, MS_BIND)
        _mount(None, f"/proc/{pid}/clear_refs", None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def _pivot_root(root: Path) -> None:
    """Make ``root`` the root and detach the old one: nothing outside it is reachable, not
    even by a process that could chroot (one with root in a user namespace)."""
    number = SYS_PIVOT_ROOT.get(os.uname().machine)
    os.chdir(root)
    if number is not None and _libc().syscall(number, b".", b".") == 0:
        _libc().umount2(b".", MNT_DETACH)  # the old root, stacked under the new one
        os.chdir("/")
        return
    os.chroot(".")  # where pivot_root is unknown: a chroot, then no root left to escape with
    os.chdir("/")


# -- in the worker: limits and user -------------------------------------------------------------
def restrict(limits: Limits, user: tuple[int, int] | None, workdir: str, *, mode: str = "",
             grouped: Iterable[str] = ()) -> None:
    """Runs in the worker before any student code: its own session, memory, CPU-time,
    file-size and process limits, then the sandbox uid (as root) or no capability at all (in a
    user namespace). ``mode``: its namespaces (``enter_namespaces``); ``grouped``: the
    controllers of its control group, whose limits then need no rlimit (``bounds``)."""
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
    filtered = "memory" not in grouped or mode == "user"
    try:
        bounds.own_session_keyring()
    except OSError:
        if not filtered:
            raise
    if filtered:
        bounds.deny_syscalls(memory="memory" not in grouped)
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
