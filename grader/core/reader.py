"""Reading a student's folder: no link followed, nothing but files and folders opened, and
nothing read with more rights than the folder's owner has.

A student's process may change its folder while the kit reads it: swap a file for a link to
the course secret between a listing and an open, leave a pipe where a file was, or give a file
of someone else's a second name (a hard link). So every entry is opened relative to its
folder's descriptor (``dir_fd``) with ``O_NOFOLLOW``, the descriptor it gave is checked with
``fstat`` (a regular file, or a folder), and the bytes are read from that descriptor: the name
is never looked up again. Pipes, sockets and devices are never opened (``lstat`` first, and
``O_NONBLOCK`` so that one swapped in since cannot block). ``admitted`` leaves out the second
name of someone else's file.

``read_regular`` reads one file this way (a notebook, a file the similarity check compares);
``walk`` a whole folder, for ``grader.core.submission.copy_submission``, which takes what it
sends. Where the copy must read with a student's rights (as root, a folder of another user's),
``walk`` runs in the *reader process*: this file's text in a fresh ``python -I -S``, which
takes that user's uid, gid and groups before it opens anything, so that the kernel itself
refuses what the student could not read, and writes its frames to its standard output
(``main``). It imports nothing but ``os``, ``stat``, ``errno`` and ``sys``, and holds nothing of
the grading process: its memory, which the student may then read, is what the student may read
anyway. The grading process trusts none of what it sends.

Frames (all lengths big-endian): a kind byte, a 4-byte length and a path relative to the
folder (``/`` between names, the names' own bytes); then, for a file, an 8-byte length and its
bytes. Kinds: ``D`` a folder, ``F`` a file, ``L`` an entry left out (a link, a pipe, a device,
someone else's second name, a file its owner cannot read), ``R`` a folder that cannot be read
(its path, a NUL byte, why), ``Z`` the end.
"""

from __future__ import annotations

import errno
import os
import stat
import sys

TYPE_CHECKING = False  # the reader process imports nothing it does not use
if TYPE_CHECKING:
    from collections.abc import Callable

FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
CHUNK = 1 << 20


def skipped(name: str) -> bool:
    """A name no submission holds for grading: hidden (``.git``, ``.venv``) or a cache."""
    return name.startswith(".") or name == "__pycache__"


def admitted(found: os.stat_result, folder: os.stat_result) -> bool:
    """Whether a regular file opened in ``folder`` (both as ``fstat`` gives them) may be read.

    A file with one name, or owned by its folder's owner, or that anybody may read, may be.
    Another's file with a second name (a hard link) may be only where nobody but root or the
    grading user could have made that name: a folder of theirs that no group or other may
    write (``cp -al`` of a class). The kernel's ``protected_hardlinks`` refuses such links to
    most users, but it is a setting the kit cannot rely on."""
    if found.st_nlink <= 1 or found.st_uid == folder.st_uid or found.st_mode & stat.S_IROTH:
        return True
    return (folder.st_uid in (0, os.geteuid())
            and not folder.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def read_at(folder_fd: int, name: str | bytes, limit: int) -> bytes | None:
    """The bytes of the regular file ``name`` in the open folder ``folder_fd``, at most
    ``limit + 1`` of them (one more than ``limit`` says it is longer); None for anything but a
    file that may be read (a link, a folder, a pipe, a device, ``admitted``'s refusal).
    OSError for what the kernel refuses otherwise (a missing file, no permission)."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=folder_fd)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENXIO):  # a link; a socket
            return None
        raise
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode) or not admitted(found, os.fstat(folder_fd)):
            return None
        return _read(fd, limit + 1)
    finally:
        os.close(fd)


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes | None:
    """``read_at`` for a path: its folder is the one named (links on the way to it are the
    caller's), its last name is never followed."""
    folder, name = os.path.split(os.fspath(path))
    if not name:
        return None
    folder_fd = os.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return read_at(folder_fd, name, limit)
    finally:
        os.close(folder_fd)


def _read(fd: int, most: int) -> bytes:
    parts, left = [], most
    while left > 0:
        part = os.read(fd, min(left, CHUNK))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


# -- the reader process -------------------------------------------------------------------------
def _frame(kind: bytes, path: bytes, data: bytes | None = None) -> None:
    head = kind + len(path).to_bytes(4, "big") + path
    if data is not None:
        head += len(data).to_bytes(8, "big")
    _write(head)
    if data:
        _write(data)


def _write(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]


def walk(root: int, budget: int, only: set[bytes] | None,
         send: Callable[..., None] = _frame) -> None:
    """Send what the folder open at ``root`` holds, as frames ``send(kind, path[, data])``, in
    the order the copy takes it: each folder's names sorted, folders entered last-found first.
    ``budget``: the bytes of file content to send in all (one more says there were more);
    ``only``: the names at the top that count (None: all). ``root`` stays open."""
    opened: list[_Open] = []
    try:
        _walk(os.dup(root), budget, only, send, opened)
    finally:  # a copy stopped early (a bound, an error) leaves no descriptor open
        for folder in opened:
            folder.close()


def _walk(root: int, budget: int, only: set[bytes] | None, send: Callable[..., None],
          opened: list[_Open]) -> None:
    todo: list[tuple[bytes, _Open | None, str]] = [(b"", None, "")]
    while todo:
        relative, parent, name = todo.pop()
        folder_fd = root
        if parent is not None:
            try:
                folder_fd = os.open(name, FOLDER_FLAGS, dir_fd=parent.fd)
            except OSError as error:
                if error.errno not in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                    send(b"R", relative[:-1] + b"\0" + (error.strerror or "").encode())
                    return
                continue  # not a folder any more: its copy stays empty
            finally:
                parent.done()
        here = _Open(folder_fd)
        opened.append(here)
        try:
            names = sorted(os.listdir(folder_fd))
        except OSError as error:
            send(b"R", relative[:-1] + b"\0" + (error.strerror or "").encode())
            return
        for entry in names:
            raw = os.fsencode(entry)
            if skipped(entry) or (only is not None and not relative and raw not in only):
                continue
            path = relative + raw
            try:
                kind = os.stat(entry, dir_fd=folder_fd, follow_symlinks=False).st_mode
            except OSError:
                kind = 0  # gone since the listing
            if stat.S_ISDIR(kind):
                send(b"D", path)
                here.waiting += 1
                todo.append((path + b"/", here, entry))
            elif stat.S_ISREG(kind):
                try:
                    data = read_at(folder_fd, entry, max(budget, 0))
                except OSError:
                    data = None  # what its owner may not read is left out
                if data is None:
                    send(b"L", path)
                    continue
                budget -= len(data)
                send(b"F", path, data)
                if budget < 0:
                    return  # past the bound: the copy stops there
            else:
                send(b"L", path)
        here.done()
    send(b"Z", b"")


class _Open:
    """A folder's descriptor, closed once the folders found in it have been opened."""

    def __init__(self, fd: int):
        self.fd, self.waiting = fd, 1  # its own listing, then each folder found in it

    def done(self) -> None:
        self.waiting -= 1
        if self.waiting == 0:
            self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def main(argv: list[str]) -> None:
    """``FD BUDGET UID GID GROUPS ONLY``: the folder open at ``FD``, read as ``UID`` (``-``:
    as started); ``GROUPS`` and ``ONLY`` comma-separated (``ONLY``'s names in hex; ``-``:
    every name)."""
    fd, budget, uid, gid, groups, only = argv
    os.chdir("/")
    if uid != "-":  # as root: the owner's rights, and no way back, before anything is opened
        os.setgroups([int(g) for g in groups.split(",") if g])
        os.setresgid(int(gid), int(gid), int(gid))
        os.setresuid(int(uid), int(uid), int(uid))
    wanted = None if only == "-" else {bytes.fromhex(n) for n in only.split(",") if n}
    root = int(fd)
    if uid != "-":  # the folder itself as its owner may read it, not as it was opened (root)
        try:
            root = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=root)
        except OSError as error:
            _frame(b"R", b"\0" + (error.strerror or "").encode())
            return
    walk(root, int(budget), wanted)


if __name__ == "__main__":
    main(sys.argv[1:])
