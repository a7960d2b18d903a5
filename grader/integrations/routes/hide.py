"""Taking folders out of sight of this process and of every process it starts.

``hide(paths)`` runs in a process forked for grading, before any submission is graded: in a
private mount namespace it covers each path with an empty, read-only tmpfs (a file with
``/dev/null``), so the graders it forks, and the workers they fork, find nothing there, while
the rest of the machine, the process that forked it included, still sees the real files. As
root that takes ``unshare(CLONE_NEWNS)``; as another user, a user namespace that maps the user to
itself (so files keep their owners and the sandbox still knows it is not root). Where the kernel
allows neither (a container whose seccomp profile forbids ``unshare``), root falls back to
``chmod 700`` on each folder for as long as the grading lasts: the sandbox uids the workers run
as cannot enter it. An ordinary user without namespaces cannot hide anything; ``hide`` says so.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
from collections.abc import Iterator
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 0x1000, 0x4000, 0x40000


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _own_namespace() -> bool:
    """Enter a private mount namespace (and, unless root, a user namespace mapping this user to
    itself). False where the kernel refuses."""
    libc = _libc()
    if os.geteuid() == 0:
        if libc.unshare(CLONE_NEWNS) != 0:
            return False
    else:
        uid, gid = os.geteuid(), os.getegid()
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
            return False
        try:
            Path("/proc/self/setgroups").write_text("deny")
            Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
            Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
        except OSError:
            return False
    # Mounts made from here on stay in this namespace.
    return libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0


def _cover(path: Path) -> bool:
    libc = _libc()
    if path.is_dir():
        flags = MS_RDONLY | MS_NOSUID | MS_NODEV
        return libc.mount(b"tmpfs", bytes(path), b"tmpfs", flags, b"mode=555,size=4k") == 0
    return libc.mount(b"/dev/null", bytes(path), None, MS_BIND, None) == 0


def hide(paths: list[Path]) -> str:
    """Cover ``paths`` (existing folders or files) for this process and its children.

    Returns how: ``"mount namespace"``, ``"permissions"`` (root without namespaces: see
    ``closed``), or ``""`` when nothing could be hidden.
    """
    paths = [Path(p).resolve() for p in paths if Path(p).exists()]
    if _own_namespace() and all(_cover(p) for p in paths):
        return "mount namespace"
    return "permissions" if os.geteuid() == 0 else ""


@contextlib.contextmanager
def closed(folders: list[Path]) -> Iterator[None]:
    """``chmod 700`` on ``folders`` while the block runs, then their modes back: the fallback
    for root where ``hide`` found no namespace."""
    saved = []
    try:
        for folder in folders:
            mode = stat.S_IMODE(os.stat(folder).st_mode)
            saved.append((folder, mode))
            os.chmod(folder, mode & 0o700)
        yield
    finally:
        for folder, mode in saved:
            with contextlib.suppress(OSError):
                os.chmod(folder, mode)
