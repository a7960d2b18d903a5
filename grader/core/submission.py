"""A submission folder, copied where a worker may read it: what is copied, within which bounds,
read with whose rights, and the answer key kept out of a worker's reach."""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import select
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection
from pathlib import Path

from . import reader

MAX_SUBMISSION_BYTES = 20 << 20
MAX_ENTRIES = 2000  # files and folders a submission may hold (hidden ones aside)
MAX_DEPTH = 16  # folders deep
MAX_PATH = 1000  # characters of a path inside the submission
NO_GROUP = 65534  # the gid an owner without an account reads with (no group's rights)
READER = Path(reader.__file__).read_text()  # the reader process's program (``reader.main``)
MAX_NAME_BYTES = 1 << 16  # a frame's path (or a folder's path and why it failed)


class BadSubmission(Exception):
    """The path given is not a folder that can be graded; ``kind``: the class report's key for
    it (``results.KINDS``)."""

    def __init__(self, message: str, kind: str = "not graded"):
        super().__init__(message)
        self.kind = kind


def copy_submission(source: Path, target: Path, *, seconds: float = 60.0,
                    only: Collection[str] | None = None) -> None:
    """Copy the submission's files into the folder ``target`` where an unprivileged worker
    can read them: what a worker may see (hidden names, caches, links, pipes and devices left
    out, and their folders never entered), within ``MAX_SUBMISSION_BYTES``, ``MAX_ENTRIES``
    names, ``MAX_DEPTH`` folders deep, ``MAX_PATH`` characters a path and ``seconds`` of
    copying. ``only``: the names at the top to copy (None: all). BadSubmission says which
    bound it broke, or what could not be read.

    A student's process may change the folder while it is copied (a lab machine, a home
    folder on JupyterHub, an exchange on a shared disk), so the copy never follows a link and
    never reads with more rights than the student has. ``reader.walk`` opens each entry
    relative to its folder's descriptor, without following a link, checks what it opened and
    reads from that descriptor. As root, for a folder owned by another user (or named by a
    link another user made), it runs in a reader process (a fresh interpreter holding nothing
    of this one) that first takes that user's uid, gid and groups: a file a hard link gives a
    second name is then read only if that person may read it, as the kernel decides, with no
    rule of the kit's to get wrong (ACLs included). A child rather than checks of permission
    bits here: the kernel's answer is the only exact one, and a folder a student controls is
    then read as that student could, whatever it holds. Where there are no rights to drop
    (this process is not root, or the folder is root's) the walk runs here, and
    ``reader.admitted`` leaves out another's file with a second name. Either way this process
    trusts nothing the walk sends: every name is checked (no ``..``, no ``/``, no hidden name,
    inside a folder it sent first) and every bound is counted here (``_Copy``)."""
    source, target = Path(source), Path(target)
    root, owners = _opened(source)
    copy = _Copy(source, target, seconds, only)
    try:
        identity = _owner(os.fstat(root), owners)
        wanted = None if only is None else {os.fsencode(n) for n in only}
        if identity is None:
            reader.walk(root, MAX_SUBMISSION_BYTES, wanted, copy.take)
        else:
            _read_as(identity, root, wanted, copy)
    finally:
        os.close(root)
    if not copy.ended:
        raise BadSubmission("the submission could not be read (the copy stopped early)")
    os.chmod(target, 0o755)


def _read_as(identity: tuple[int, int, list[int]], root: int, wanted: set[bytes] | None,
             copy: _Copy) -> None:
    """The walk in a reader process with ``identity``'s rights, its frames taken here."""
    uid, gid, groups = identity
    argv = [sys.executable, "-I", "-S", "-c", READER, str(root), str(MAX_SUBMISSION_BYTES),
            str(uid), str(gid), ",".join(map(str, groups)),
            "-" if wanted is None else ",".join(n.hex() for n in wanted) or ","]
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=errors, pass_fds=(root,), cwd="/",
                                   env={"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"})
        try:
            _receive(_Stream(process, copy), copy)
        except _Stopped as stopped:
            process.kill()
            process.wait()
            errors.seek(0)
            tail = errors.read()[-300:].decode("utf-8", "replace").strip().splitlines()
            raise BadSubmission("the submission could not be read (" + (
                f"{stopped}: {tail[-1]}" if tail else str(stopped)) + ")") from None
        finally:
            with contextlib.suppress(OSError):
                process.kill()
            process.wait()
            assert process.stdout is not None
            process.stdout.close()


def _owner(folder: os.stat_result, owners: list[int]) -> tuple[int, int, list[int]] | None:
    """Whose rights the reader takes (uid, gid, groups): None where they are this process's
    (it is not root, or the submission is root's). ``folder``: the folder opened (its
    ``fstat``); ``owners``: those of the links followed on the way to it (``_opened``). The
    last of those that is neither root nor this process's chose where the path leads, and its
    owner's rights are taken; otherwise the folder's owner's."""
    if os.geteuid() != 0:
        return None
    chosen = [owner for owner in owners if owner not in (0, os.geteuid())]
    uid = chosen[-1] if chosen else folder.st_uid
    if uid == 0:
        return None
    try:
        account = pwd.getpwuid(uid)
        return uid, account.pw_gid, os.getgrouplist(account.pw_name, account.pw_gid)
    except (KeyError, OSError):
        return uid, NO_GROUP, []


MAX_LINKS = 40  # links followed on the way to a submission (the kernel's own bound)
PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


def _opened(source: Path) -> tuple[int, list[int]]:
    """The submission's folder, open, and the owners of the links followed on the way to it.

    Not root: opened as the path names it (its rights are this process's whoever chose where
    the path leads). As root: every name of the path, and of each link's target, is opened
    relative to the folder before it (``O_PATH``, ``O_NOFOLLOW``), and a link is read from
    what was opened, so that no name is looked up twice: a student whose folder is a link to
    a folder of root's, or whose link an instructor's link names, or who swaps a link in while
    the copy opens the folder, has the link's owner noted. On d63756d, which took the owner of
    the path's last name alone, after opening it, both read the answer key as root and graded
    it as the student's (issue 36)."""
    if os.geteuid() != 0:
        try:
            return os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), []
        except OSError as error:
            raise BadSubmission(f"cannot read ./ in the submission ({error.strerror})") from None
    todo = list(reversed(os.path.abspath(source).split("/")))
    owners: list[int] = []
    current = os.open("/", PATH_FLAGS | os.O_DIRECTORY)
    try:
        while todo:
            name = todo.pop()
            if name in ("", "."):
                continue
            step = os.open(name, PATH_FLAGS, dir_fd=current)  # "..": the kernel's parent
            found = os.fstat(step)
            if stat.S_ISLNK(found.st_mode):
                try:
                    owners.append(found.st_uid)
                    if len(owners) > MAX_LINKS:
                        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
                    target = os.readlink("", dir_fd=step)  # the link opened, not its name
                finally:
                    os.close(step)
                todo += reversed(target.split("/"))
                if target.startswith("/"):
                    os.close(current)
                    current = os.open("/", PATH_FLAGS | os.O_DIRECTORY)
                continue
            os.close(current)
            current = step
        return os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=current), owners
    except OSError as error:
        raise BadSubmission(f"cannot read ./ in the submission ({error.strerror})") from None
    finally:
        os.close(current)


class _Stopped(Exception):
    """The reader's stream ended early or broke its format (the kit's failure, or a process
    of the owner's that ended or traced the reader)."""


class _Copy:
    """What the walk finds, written into ``target``: each entry checked and counted here, in
    the order the walk sends it, with the bounds' messages."""

    def __init__(self, source: Path, target: Path, seconds: float,
                 only: Collection[str] | None):
        self.source, self.target, self.seconds = source, os.fsencode(target), seconds
        self.deadline = time.monotonic() + seconds
        self.tops = None if only is None else {os.fsencode(n) for n in only}
        self.folders: set[bytes] = {b""}  # made so far, relative to target
        self.taken: set[bytes] = set()  # every name sent so far
        self.total, self.entries, self.ended = 0, 0, False

    def take(self, kind: bytes, path: bytes, data: bytes | None = None) -> None:
        """One frame of the walk (``reader``'s kinds)."""
        if self.entry(kind, path):
            if kind == b"F":
                self.room(len(data or b""))
            self.write(kind, path, data or b"")

    def entry(self, kind: bytes, path: bytes) -> bool:
        """Check a frame's name and count it; whether it is a folder or file to write."""
        if kind == b"Z":
            self.ended = True
            return False
        if kind == b"R":
            where, _, why = path.partition(b"\0")
            raise BadSubmission(f"cannot read {_shown(where) or '.'}/ in the submission "
                                f"({_shown(why)})")
        parts = path.split(b"/")
        parent = b"/".join(parts[:-1])
        if (kind not in b"DFL" or len(kind) != 1 or self.ended or parent not in self.folders
                or path in self.taken or not _plain(parts[-1])
                or (self.tops is not None and not parent and parts[-1] not in self.tops)):
            raise _Stopped("a frame the copy does not take")
        self.taken.add(path)
        self.entries += 1
        if self.entries > MAX_ENTRIES:
            raise BadSubmission(f"the submission holds more than {MAX_ENTRIES} files and "
                                "folders (hidden ones aside)")
        if len(os.fsdecode(path)) > MAX_PATH:
            raise BadSubmission(f"a path in the submission is longer than {MAX_PATH} "
                                "characters")
        if time.monotonic() > self.deadline:
            raise BadSubmission(f"copying the submission took more than {self.seconds:g} s")
        if kind == b"D" and len(parts) > MAX_DEPTH:
            raise BadSubmission(f"the submission's folders are more than {MAX_DEPTH} deep")
        return kind != b"L"

    def room(self, size: int) -> None:
        """Count a file's bytes before they are read."""
        self.total += size
        if self.total > MAX_SUBMISSION_BYTES:
            raise BadSubmission(f"{self.source} holds more than "
                                f"{MAX_SUBMISSION_BYTES >> 20} MiB", "too large")

    def write(self, kind: bytes, path: bytes, data: bytes) -> None:
        destination = os.path.join(self.target, path)
        if kind == b"D":
            os.mkdir(destination, 0o755)
            os.chmod(destination, 0o755)
            self.folders.add(path)
            return
        fd = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o644)
        try:
            os.fchmod(fd, 0o644)
            _write_all(fd, data)
        finally:
            os.close(fd)


class _Stream:
    """The reader process's standard output, read to the copy's deadline."""

    def __init__(self, process: subprocess.Popen[bytes], copy: _Copy):
        assert process.stdout is not None
        self.fd, self.copy = process.stdout.fileno(), copy
        self.buffer = bytearray()

    def take(self, count: int) -> bytes:
        while len(self.buffer) < count:
            left = self.copy.deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise BadSubmission("copying the submission took more than "
                                    f"{self.copy.seconds:g} s")
            part = os.read(self.fd, max(count - len(self.buffer), 1 << 16))
            if not part:
                raise _Stopped("the reader stopped before the end")
            self.buffer += part
        data, self.buffer = bytes(self.buffer[:count]), self.buffer[count:]
        return data


def _receive(stream: _Stream, copy: _Copy) -> None:
    """Take the reader's frames (``reader._frame``) until its end."""
    while not copy.ended:
        kind = stream.take(1)
        length = int.from_bytes(stream.take(4), "big")
        if length > MAX_NAME_BYTES:
            raise _Stopped("a name too long to be one")
        path = stream.take(length)
        if copy.entry(kind, path):
            data = b""
            if kind == b"F":
                size = int.from_bytes(stream.take(8), "big")
                copy.room(size)
                data = stream.take(size)
            copy.write(kind, path, data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _shown(name: bytes) -> str:
    """A path of the student's in a message: what does not print (a control or bidirectional
    character, a byte that is not UTF-8) as its escape, as ``inert.name`` shows folders."""
    out = []
    for c in name.decode("utf-8", "surrogateescape"):
        if 0xDC80 <= ord(c) <= 0xDCFF:  # a byte that is not UTF-8
            out.append(f"\\x{ord(c) - 0xDC00:02x}")
        elif c == "\\":
            out.append("\\\\")
        elif not c.isprintable():
            out.append(f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
        else:
            out.append(c)
    return "".join(out)


def _plain(name: bytes) -> bool:
    """A name the reader may send: one name (no ``/``, no NUL, not ``.`` or ``..``), not one
    the copy leaves out."""
    return bool(name) and b"\0" not in name and name not in (b".", b"..") and not (
        reader.skipped(os.fsdecode(name)))


def protect_key(key_folder: Path) -> None:
    """When grading as root, keep the answer key out of the unprivileged worker's reach."""
    from ..sandbox.isolation import unprivileged_user

    if unprivileged_user() is None:
        return
    mode = key_folder.stat().st_mode
    if mode & 0o077:
        os.chmod(key_folder, stat.S_IMODE(mode) & 0o700)
