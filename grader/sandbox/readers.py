"""The reader, seen from the grading process: one per grading run, started as a fresh
interpreter (``grader.sandbox.reader`` is what runs inside), asked over its socket to read an
exercise's files under that exercise's limits (``read_files``) or a notebook's answer cells
(``cell_names``).

The grading process reads a file only to hash it: its results are kept by the file's digest,
the rule and the modules it may import (a batch reads the same stubs many times), and the
seconds each took are counted as the student's wherever the result is used. A file the reader
could not read within the limits is kept as such by its digest and the limits, so the next
exercise need not try again. Replies are plain JSON, and their shape is checked here.
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import served
from .confine import GiB, Limits, claim_sandbox_user, kill_user_processes, unprivileged_user
from .reader import BOOT, FRAME_CAP, SOURCES

SANDBOX = Path(__file__).resolve().parent
CORE = SANDBOX.parent / "core"  # the source rule's modules (``reader.SOURCES``)
UNREAD = "could not be read within its limits"
CACHE_SIZE = 4096  # results kept (the lru_cache the in-process rule had)
GRACE = 1.0  # seconds past its own limit the grading process waits for the reader's end


@dataclass(frozen=True)
class Read:
    """What the reader found in one file."""

    verdict: str | None = None  # why the file breaks the source rule, None where it keeps it
    imports: tuple[str, ...] = ()  # the submission's modules it imports
    seconds: float = 0.0  # the wall seconds reading it took: the student's time
    readable: bool = True  # False: it could not be read within the exercise's limits
    exports: tuple[str, ...] = ()  # the names it binds to a module (no other file may take)
    takes: tuple[tuple[str, str, int, str], ...] = ()  # own module, name taken, line, what


def unread(path: str, limits: Limits) -> str:
    """The status of an exercise whose file ``path`` could not be read within ``limits``."""
    return (f"{path} {UNREAD} ({limits.memory / GiB:g} GiB of memory, {limits.timeout:g} s "
            "for the exercise)")


# -- the server ------------------------------------------------------------------------------
class Server:
    """The reader's process: a fresh ``python -I`` holding the reader's and the rule's code,
    forking a child for each request (``reader.serve``). Started by one grading process and
    shared by those it forks (each request is a connection of its own)."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="attention-kit-reader-")  # 0700: ours alone
        self.path = os.path.join(self.folder, "socket")
        self.owner = os.getpid()
        self.log = tempfile.TemporaryFile()
        sources = {name: ((SANDBOX if name == "reader" else CORE) / f"{name}.py").read_text()
                   for name in SOURCES}
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-c", BOOT, self.path], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, cwd="/",
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/"})
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(sources).encode() + b"\n")
        self.process.stdin.flush()
        self._ready = False

    def wait_ready(self) -> None:
        if self._ready or os.getpid() != self.owner:
            return
        assert self.process.stdout is not None
        if self.process.stdout.readline() != b"ready\n":
            self.log.seek(0)
            tail = self.log.read()[-2000:].decode("utf-8", "replace")
            raise RuntimeError(f"the reader did not start:\n{tail}")
        self._ready = True

    def alive(self) -> bool:
        if os.getpid() == self.owner:
            return self.process.poll() is None
        try:  # a forked child cannot wait for its parent's child: ask the kernel instead
            os.kill(self.process.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def connect(self) -> socket.socket | None:
        """A new connection to the reader, or None where it is gone."""
        self.wait_ready()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        for _ in range(200):  # a forked process may ask before the reader is listening
            try:
                sock.connect(self.path)
                return sock
            except OSError:
                if os.getpid() == self.owner or not self.alive():
                    break
                time.sleep(0.05)
        sock.close()
        return None

    def close(self) -> None:
        if os.getpid() != self.owner:
            return
        served.stop(self.process, self.log, self.path, self.folder)


_SERVER: list[Server] = []


def start() -> Server:
    """This run's reader, started on first use (a forked process shares its parent's)."""
    if not _SERVER:
        _SERVER.append(Server())
        atexit.register(_SERVER[0].close)
    return _SERVER[0]


def _connected() -> socket.socket:
    sock = start().connect()
    if sock is None:  # gone (or out of this process's sight): a reader of our own
        _SERVER.clear()
        sock = start().connect()
    if sock is None:
        raise RuntimeError("the reader does not accept requests")
    return sock


# -- asking it -------------------------------------------------------------------------------
class _Request:
    """One request to the reader, read by a child of its own: as a sandbox uid of its own
    where grading as root (as a worker would be), within ``timeout`` seconds. Its replies come
    one at a time (``next``); ``close`` makes sure the child is gone."""

    def __init__(self, request: dict[str, Any], folder: int | None, timeout: float,
                 limits: Limits):
        self.sock = _connected()
        self.data, self.ended = b"", False
        self.uid, self.lock = None, None
        nobody = unprivileged_user() if limits.drop_privileges else None
        if nobody is not None:
            user, self.lock = claim_sandbox_user(nobody)
            self.uid = user.pw_uid
            request = {**request, "user": [user.pw_uid, user.pw_gid]}
        data = json.dumps({**request, "timeout": timeout, "memory": limits.memory}).encode()
        head = len(data).to_bytes(8, "little")
        try:
            if folder is None:
                self.sock.sendall(head + data)
            else:
                socket.send_fds(self.sock, [head], [folder])
                self.sock.sendall(data)
        except OSError:
            self.close()
            raise RuntimeError("the reader did not take a request") from None
        self.last = time.monotonic()
        self.deadline = self.last + timeout + GRACE

    def next(self) -> tuple[dict[str, Any] | None, float]:
        """The next reply (None: the reader ended, or went past its limits, or sent what it
        never sends) and the seconds since the one before."""
        reply = self._frame()
        now = time.monotonic()
        seconds, self.last = now - self.last, now
        return reply, seconds

    def _frame(self) -> dict[str, Any] | None:
        while True:
            if len(self.data) >= 4:
                size = int.from_bytes(self.data[:4], "little")
                if size > FRAME_CAP:
                    return None
                if len(self.data) >= 4 + size:
                    break
            if not self._more(self.deadline):
                return None
        frame, self.data = self.data[4:4 + size], self.data[4 + size:]
        try:
            reply = json.loads(frame)
        except ValueError:
            return None
        return reply if isinstance(reply, dict) else None

    def _more(self, deadline: float) -> bool:
        """Read what the reader sent next, until ``deadline``; False at its end or past it."""
        left = deadline - time.monotonic()
        if self.ended or left <= 0 or not select.select([self.sock], [], [], left)[0]:
            return False
        try:
            more = self.sock.recv(1 << 16)
        except OSError:
            more = b""
        self.ended = not more
        self.data += more
        return bool(more)

    def close(self) -> None:
        """Wait (a little) for the child's end, which closes its side; past that, or where
        it is still sending, end it (as the sandbox uid) and give the uid back."""
        end = min(self.deadline, time.monotonic() + GRACE)
        while not self.ended and self._more(end):
            self.data = b""
        self.sock.close()
        if self.lock is not None:
            if not self.ended and self.uid is not None:
                kill_user_processes(self.uid)
            os.close(self.lock)
            self.lock = None


# -- an exercise's files ---------------------------------------------------------------------
_CACHE: dict[tuple[Any, ...], Read] = {}
_DIGESTS: dict[tuple[int, ...], bytes] = {}


def _digest(path: Path) -> bytes:
    """The file's SHA-256, read in blocks (never whole): once per version of the file."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as handle:
        info = os.fstat(fd)
        # not its ctime: each exercise's view gives the copy's files a name more, which
        # changes it (with it, 1,980 helper files were hashed again for every exercise)
        key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
        if key not in _DIGESTS:
            _DIGESTS[key] = hashlib.file_digest(handle, "sha256").digest()
        return _DIGESTS[key]


def _keep(key: tuple[Any, ...], found: Read) -> None:
    if len(_CACHE) >= CACHE_SIZE:
        del _CACHE[next(iter(_CACHE))]
    _CACHE[key] = found


def read_files(folder: Path, paths: list[str], rule: Any, own: frozenset[str],
               limits: Limits) -> dict[str, Read]:
    """What the reader finds in each of ``paths`` (relative to ``folder``), in that order,
    held to ``rule`` with ``own`` the modules they may import, within ``limits``: one reader
    for them all, ``limits.timeout`` seconds for them all. A file it could not read is
    ``readable=False``; the next one goes on in a fresh reader, in the time left."""
    rule_fields = {f.name: getattr(rule, f.name) for f in dataclasses.fields(rule)}
    keys = {}
    found: dict[str, Read] = {}
    for path in paths:
        digest = _digest(folder / path)
        keys[path] = (digest, rule, own), (digest, limits.memory, limits.timeout)
        hit = _CACHE.get(keys[path][0]) or _CACHE.get(keys[path][1])
        if hit is not None:
            found[path] = hit
    spent = sum(f.seconds for f in found.values())
    todo = [p for p in paths if p not in found]
    handle = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC) if todo else -1
    try:
        while todo:
            left = limits.timeout - spent
            if left <= 0:  # the time went on the others: none left for these
                found.update((p, Read(readable=False)) for p in todo)
                break
            replies = _Request({"kind": "rule", "paths": todo, "rule": rule_fields,
                                "own": sorted(own)}, handle, left, limits)
            try:
                while todo:
                    reply, seconds = replies.next()
                    path = todo.pop(0)
                    spent += seconds
                    read = _checked(reply, path, own, seconds)
                    found[path] = read
                    _keep(keys[path][0] if read.readable else keys[path][1], read)
                    if not read.readable:
                        break
            finally:
                replies.close()
    finally:
        if handle >= 0:
            os.close(handle)
    return found


def _checked(reply: dict[str, Any] | None, path: str, own: frozenset[str],
             seconds: float) -> Read:
    """The reply for ``path`` as a ``Read``; one of another shape (none, or not what the
    reader sends) is a file that could not be read."""
    if (reply is None or set(reply) != {"path", "verdict", "imports", "exports", "takes"}
            or reply["path"] != path or not isinstance(reply["imports"], list)
            or not (reply["verdict"] is None or isinstance(reply["verdict"], str))
            or not all(isinstance(name, str) and name in own for name in reply["imports"])
            or not isinstance(reply["exports"], list)
            or not all(isinstance(name, str) for name in reply["exports"])
            or not isinstance(reply["takes"], list) or not all(
                isinstance(take, list) and len(take) == 4 and isinstance(take[0], str)
                and isinstance(take[1], str) and type(take[2]) is int
                and isinstance(take[3], str) for take in reply["takes"])):
        return Read(seconds=seconds, readable=False)
    return Read(reply["verdict"], tuple(reply["imports"]), seconds,
                exports=tuple(reply["exports"]),
                takes=tuple(tuple(take) for take in reply["takes"]))


# -- a notebook's answer cells ---------------------------------------------------------------
def cell_names(texts: dict[str, str], wanted: set[str],
               limits: Limits = Limits()) -> dict[str, tuple[set[str], set[str]]]:
    """For each cell of ``texts`` (name -> text) the reader could read within ``limits``:
    the names of ``wanted`` it defines at its top level, and those it uses
    (``reader.names``). A cell it could not read is left out."""
    found: dict[str, tuple[set[str], set[str]]] = {}
    todo = list(texts)
    end = time.monotonic() + limits.timeout
    while todo and end - time.monotonic() > 0:
        replies = _Request({"kind": "names", "texts": {n: texts[n] for n in todo},
                            "names": sorted(wanted)}, None, end - time.monotonic(), limits)
        try:
            while todo:
                reply, _ = replies.next()
                name = todo.pop(0)
                if not (reply is not None and set(reply) == {"path", "defined", "used"}
                        and reply["path"] == name and all(
                            isinstance(x, list) and all(isinstance(n, str) and n in wanted
                                                        for n in x)
                            for x in (reply["defined"], reply["used"]))):
                    break
                found[name] = set(reply["defined"]), set(reply["used"])
        finally:
            replies.close()
    return found
