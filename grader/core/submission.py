"""A submission folder, copied where a worker may read it: what is copied, within which bounds,
read with whose rights, and the answer key kept out of a worker's reach."""

from __future__ import annotations

import contextlib
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
FRAME_KINDS = b"DFLRZ"
MAX_NAME_BYTES = 1 << 16  # a frame's path (or a folder's path and why it failed)


class BadSubmission(Exception):
    """The path given is not a folder that can be graded."""


def copy_submission(source: Path, target: Path, *, seconds: float = 60.0,
                    only: Collection[str] | None = None) -> None:
    """Copy the submission's files into the folder ``target`` where an unprivileged worker
    can read them: what a worker may see (hidden names, caches, links, pipes and devices left
    out, and their folders never entered), within ``MAX_SUBMISSION_BYTES``, ``MAX_ENTRIES``
    names, ``MAX_DEPTH`` folders deep, ``MAX_PATH`` characters a path and ``seconds`` of
    copying. ``only``: the names at the top to copy (None: all). BadSubmission says which
    bound it broke, or what could not be read.

    A student's process may change the folder while it is copied (a lab machine, a home
    folder on JupyterHub, an exchange on a shared disk), so the copy never reads with more
    rights than the student has: a reader process (``grader.core.reader``, a fresh
    interpreter holding nothing of this one) opens each entry relative to its folder's
    descriptor, without following a link, checks what it opened, and sends the bytes here.
    As root it first takes the uid, gid and groups of the submission's owner: whoever owns
    ``source``, or whoever made it where it is a link made by someone else than root or the
    grading user. A file a hard link gives a second name is then read only if that person
    may read it, decided by the kernel, with no rule of the kit's to get wrong (ACLs
    included); as another user, ``reader.admitted`` leaves out another's file with a second
    name. A child rather than checks of permission bits here: the kernel's answer is the
    only exact one, and a folder a student controls is then read as that student could,
    whatever it holds. This process trusts nothing the reader sends: every name is checked
    (no ``..``, no ``/``, no hidden name, inside a folder it sent first) and every bound is
    counted here, where the reader cannot change it."""
    source, target = Path(source), Path(target)
    try:
        root = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise BadSubmission(f"cannot read ./ in the submission ({error.strerror})") from None
    try:
        identity = _owner(source, os.fstat(root))
        wanted = "-" if only is None else ",".join(os.fsencode(n).hex() for n in only) or ","
        argv = [sys.executable, "-I", "-S", "-c", READER, str(root),
                str(MAX_SUBMISSION_BYTES), *(("-", "-", "") if identity is None else (
                    str(identity[0]), str(identity[1]), ",".join(map(str, identity[2])))),
                wanted]
        with tempfile.TemporaryFile() as errors:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=errors, pass_fds=(root,), cwd="/",
                                       env={"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"})
            os.close(root)
            root = -1
            try:
                _receive(process, source, target, time.monotonic() + seconds, seconds, only)
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
    finally:
        if root >= 0:
            os.close(root)
    os.chmod(target, 0o755)


def _owner(source: Path, folder: os.stat_result) -> tuple[int, int, list[int]] | None:
    """Whose rights the reader takes (uid, gid, groups): None where they are this process's
    (it is not root, or the submission is root's)."""
    if os.geteuid() != 0:
        return None
    uid = folder.st_uid
    with contextlib.suppress(OSError):
        link = os.lstat(source)
        if stat.S_ISLNK(link.st_mode) and link.st_uid not in (0, os.geteuid()):
            uid = link.st_uid  # a link another user made: read what they may read
    if uid == 0:
        return None
    try:
        account = pwd.getpwuid(uid)
        return uid, account.pw_gid, os.getgrouplist(account.pw_name, account.pw_gid)
    except (KeyError, OSError):
        return uid, NO_GROUP, []


class _Stopped(Exception):
    """The reader's stream ended early or broke its format (the kit's failure, or a process
    of the owner's that ended or traced the reader)."""


class _Stream:
    """The reader's standard output, read to a deadline."""

    def __init__(self, process: subprocess.Popen[bytes], deadline: float, seconds: float):
        assert process.stdout is not None
        self.fd, self.deadline, self.seconds = process.stdout.fileno(), deadline, seconds
        self.buffer = bytearray()

    def take(self, count: int) -> bytes:
        while len(self.buffer) < count:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise BadSubmission(f"copying the submission took more than {self.seconds:g} s")
            part = os.read(self.fd, max(count - len(self.buffer), 1 << 16))
            if not part:
                raise _Stopped("the reader stopped before the end")
            self.buffer += part
        data, self.buffer = bytes(self.buffer[:count]), self.buffer[count:]
        return data


def _receive(process: subprocess.Popen[bytes], source: Path, target: Path, deadline: float,
             seconds: float, only: Collection[str] | None) -> None:
    """Write what the reader sends into ``target``, checking each frame and every bound."""
    stream = _Stream(process, deadline, seconds)
    folders, taken = {b""}, set()  # the folders made so far; every name sent so far
    tops = None if only is None else {os.fsencode(n) for n in only}
    total, entries = 0, 0
    while True:
        kind = stream.take(1)
        if not kind or kind not in FRAME_KINDS:
            raise _Stopped("a frame of an unknown kind")
        length = int.from_bytes(stream.take(4), "big")
        if length > MAX_NAME_BYTES:
            raise _Stopped("a name too long to be one")
        path = stream.take(length)
        if kind == b"Z":
            return
        if kind == b"R":
            where, _, why = path.partition(b"\0")
            raise BadSubmission(f"cannot read {_shown(where) or '.'}/ in the submission "
                                f"({_shown(why)})")
        parts = path.split(b"/")
        parent = b"/".join(parts[:-1])
        if (parent not in folders or path in taken or not _plain(parts[-1])
                or (tops is not None and not parent and parts[-1] not in tops)):
            raise _Stopped("a name the copy does not take")
        taken.add(path)
        entries += 1
        relative = os.fsdecode(path)
        if entries > MAX_ENTRIES:
            raise BadSubmission(f"the submission holds more than {MAX_ENTRIES} files and "
                                "folders (hidden ones aside)")
        if len(relative) > MAX_PATH:
            raise BadSubmission(f"a path in the submission is longer than {MAX_PATH} "
                                "characters")
        if time.monotonic() > deadline:
            raise BadSubmission(f"copying the submission took more than {seconds:g} s")
        destination = os.path.join(os.fsencode(target), path)
        if kind == b"D":
            if len(parts) > MAX_DEPTH:
                raise BadSubmission(f"the submission's folders are more than {MAX_DEPTH} "
                                    "deep")
            os.mkdir(destination, 0o755)
            os.chmod(destination, 0o755)
            folders.add(path)
        elif kind == b"F":
            size = int.from_bytes(stream.take(8), "big")
            total += size
            if total > MAX_SUBMISSION_BYTES:
                raise BadSubmission(f"{source} holds more than "
                                    f"{MAX_SUBMISSION_BYTES >> 20} MiB")
            fd = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o644)
            try:
                os.fchmod(fd, 0o644)
                while size:
                    part = stream.take(min(size, reader.CHUNK))
                    size -= len(part)
                    _write_all(fd, part)
            finally:
                os.close(fd)


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
