"""The worker's view of the files: a new root, built of mounts, that holds what a worker needs
of the machine and nothing else. Split from ``grader.sandbox.confine`` (what confines a
worker), whose namespaces it is built in.

It runs in the worker's *init*, the first process of its new PID and mount namespaces, after
the zygote forks and before any student code (``grader.sandbox.zygote``): ``private_view``
builds a root that holds the system's libraries, the interpreter and its packages (for a NumPy
worker, NumPy alone: ``PACKAGES``), the devices, a fresh /proc, a private size-capped /tmp and
/dev/shm, and the submission copy at its path, all read-only but the scratch space; nothing
else (the kit, the answer key, other students' folders, /home, /var/tmp) is there at all; then
``seal_proc`` covers the worker's ``clear_refs``. What it reads of the machine (``visible_paths``,
``packaged``) the zygote reads once, before it forks. Like ``confine``, this module imports
only the standard library (and ``confine``): it is shipped to the zygote as source.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import glob
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from .confine import _libc

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE, MNT_DETACH = 0x20, 0x1000, 0x4000, 0x40000, 2

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
