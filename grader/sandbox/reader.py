"""The reader: where a submission's files are parsed and held to the source rule, under the
student's limits (the grading side: ``grader.sandbox.readers``).

The grading process never parses a student's text: a parse takes memory some hundreds of times
the size of the text (2 MB of one list literal, about 1 GB), and no limit of the grading
process's own would stop it before it stopped the machine. The reader is a fresh interpreter
in isolated mode (``python -I -c BOOT``), sent the sources of this module and of the source
rule's (``SOURCES``: ``grader.core.delegation`` and the modules it is split into; nothing else
of the kit; they import only the standard library and one another).
It imports what the parser itself may import (``preload``), then forks a child for each
request, and the child, before it reads a byte of the student's:

- takes the exercise's limits: address space and data of ``memory`` bytes beyond what it holds
  (``RLIMIT_AS``, ``RLIMIT_DATA``: the parse of a huge literal fails there), ``timeout`` CPU
  seconds (``RLIMIT_CPU``) and as many wall seconds (``alarm``, whose default action ends the
  process), no file it may write, no process it may start, no core;
- takes the sandbox uid it was given (as root), the worker's user;

then reads each file through the folder's descriptor the grading process passed (``O_NOFOLLOW``,
a regular file only), parses it as the interpreter would (its coding line honoured), and sends
one reply for it before it reads the next: its verdict, the submission's modules it imports,
the names it binds to a module and those it takes from the submission's modules.
A child past a limit ends; the grading process then knows the file it was on, and that file
"could not be read within its limits". Everything it sends is plain JSON.

Request (on a new connection to the reader's socket, one per request): eight bytes, the length
of what follows, carrying one descriptor (the folder; none for ``texts``), then a JSON object:
``kind`` ("rule" or "names"), ``paths`` (relative to the folder) or ``texts`` (name -> text),
``rule`` (the fields of a ``Rule``), ``own``, ``names``, ``timeout``, ``memory`` and ``user``
(``[uid, gid]`` or null). Replies: one frame per file, in order: four bytes, the length of a
JSON object, then the object; for "rule" ``{"path", "verdict", "imports", "exports",
"takes"}`` (``delegation_verdicts.read``), for "names"
``{"path", "defined", "used"}``. Nothing follows the last.
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import os
import resource
import select
import signal
import socket
import stat
import sys
import traceback
from typing import Any

FRAME_CAP = 4 << 20  # bytes of one reply: a verdict (each place capped), the modules imported
REQUEST_CAP = 64 << 20  # bytes of one request: paths and notebook cells
# The modules BOOT is sent, in the order it runs them (each after those it imports): the source
# rule's, of grader.core, then this one.
SOURCES = ("delegation_names", "delegation", "delegation_bindings", "delegation_scan",
           "delegation_verdicts", "reader")

# Runs in a fresh `python -I -c BOOT SOCKET_PATH`: reads the sources as one JSON object from
# stdin (``SOURCES``, in order), makes each a module of the package `_reader` (the rule's import
# one another) and serves
# with the rule's verdicts (``delegation_verdicts``, which holds its ``Rule`` too). Stdin stays
# open: when the grading process that started the reader goes away, the reader ends.
BOOT = r"""
import json, sys, types
sources = json.loads(sys.stdin.buffer.readline())
package = types.ModuleType("_reader")
package.__path__ = []
sys.modules["_reader"] = package
modules = {}
for name in sources:
    module = types.ModuleType("_reader." + name)
    module.__package__ = "_reader"
    sys.modules[module.__name__] = module
    setattr(package, name, module)
    exec(compile(sources[name], "<reader " + name + ">", "exec"), module.__dict__)
    modules[name] = module
modules["reader"].serve(modules["delegation_verdicts"], *sys.argv[1:])
"""


class OverLimit(Exception):
    """Reading a file went past the reader's memory limit (not the parser's own depth)."""


# -- the server ------------------------------------------------------------------------------
def preload() -> None:
    """Import, before any child drops to a sandbox uid that may not read the interpreter's
    files, what the parser itself imports on the way: every codec a coding line may name
    (a file in UTF-7 is read as the interpreter reads it, or the rule would read other text
    than the worker runs) and ``unicodedata`` (identifiers are normalised with it)."""
    import encodings
    import importlib
    import unicodedata  # noqa: F401

    for folder in encodings.__path__:
        for entry in sorted(os.listdir(folder)):
            name = entry.removesuffix(".py")
            if name != entry and name.isidentifier() and name != "__init__":
                with contextlib.suppress(Exception):  # mbcs, oem: Windows's own
                    importlib.import_module(f"encodings.{name}")


def serve(delegation: Any, path: str) -> None:
    """Listen on ``path``; fork a child for each connection (``answer``), until stdin ends."""
    preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        readable, _, _ = select.select([sys.stdin, listener], [], [], 1.0)
        with contextlib.suppress(ChildProcessError):  # the children that ended (their CPU
            while os.waitpid(-1, os.WNOHANG)[0]:  # time then counts as the reader's)
                pass
        if sys.stdin in readable and not sys.stdin.buffer.read1(1):
            with contextlib.suppress(OSError):  # the grading process that started us is gone
                os.unlink(path)
                os.rmdir(os.path.dirname(path))
            os._exit(0)
        if listener in readable:
            with contextlib.suppress(OSError):
                conn, _ = listener.accept()
                if os.fork() == 0:
                    code = 1
                    try:
                        listener.close()
                        answer(delegation, conn)
                        code = 0
                    except BaseException:  # a limit, or the kit's own failure: for the log
                        with contextlib.suppress(BaseException):
                            traceback.print_exc()
                    finally:
                        os._exit(code)
                conn.close()


def answer(delegation: Any, conn: socket.socket) -> None:
    """The child: one request, read under its limits, one reply per file."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # the reader's stdin and stdout belong to the grading process
    os.dup2(null, 1)
    os.close(null)
    conn.settimeout(30.0)  # the grading process sends its request at once
    request, folder = receive(conn)
    user = request.get("user")
    limit(float(request["timeout"]), int(request["memory"]), user)
    conn.settimeout(None)
    if request["kind"] == "names":
        wanted = set(request["names"])
        for name, text in request["texts"].items():
            defined, used = names(text, wanted)
            send(conn, {"path": name, "defined": defined, "used": used})
        return
    rule = delegation.Rule(**{k: tuple(v) if isinstance(v, list) else v
                              for k, v in request["rule"].items()})
    own = frozenset(request["own"])
    for path in request["paths"]:
        found = judged(delegation, read(folder, path), rule, own)
        send(conn, {"path": path, **found, "imports": sorted(found["imports"] & own)})


def receive(conn: socket.socket) -> tuple[dict[str, Any], int]:
    """The request, and the folder's descriptor that came with it (-1: none)."""
    head, fds, _, _ = socket.recv_fds(conn, 8, 1)
    while len(head) < 8:
        more = conn.recv(8 - len(head))
        if not more:
            raise EOFError("a request of fewer than eight bytes")
        head += more
    size = int.from_bytes(head, "little")
    if size > REQUEST_CAP:
        raise ValueError(f"a request of more than {REQUEST_CAP} bytes")
    data = bytearray()
    while len(data) < size:
        more = conn.recv(min(size - len(data), 1 << 20))
        if not more:
            raise EOFError("a request cut short")
        data += more
    for extra in fds[1:]:
        os.close(extra)
    return json.loads(data), fds[0] if fds else -1


def limit(timeout: float, memory: int, user: list[int] | None) -> None:
    """The exercise's limits on this process, then its sandbox uid (as root). Past the memory
    limit an allocation fails (MemoryError, or the process dies); past the time limit the
    kernel ends it (SIGXCPU, SIGALRM)."""
    seconds = max(1, math.ceil(timeout))
    for which, now in ((resource.RLIMIT_AS, _status("VmSize")),
                       (resource.RLIMIT_DATA, _status("VmData"))):
        resource.setrlimit(which, (now + memory, now + memory))
    _LIMIT[0] = _status("VmSize") + memory // 2  # past this, a MemoryError is the limit's
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(seconds)
    if user is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))  # it starts no process
        os.setgroups([])
        os.setgid(user[1])
        os.setuid(user[0])


_LIMIT = [0]  # VmSize (bytes) past which a MemoryError means the memory limit


def _status(field: str) -> int:
    """A figure of this process from ``/proc/self/status``, in bytes (0 if absent)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    return 0


def read(folder: int, path: str) -> bytes:
    """The bytes of ``path`` in ``folder``: a regular file, never through a link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                 dir_fd=folder)
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return handle.read()


def judged(delegation: Any, source: bytes, rule: Any, own: frozenset[str]) -> dict[str, Any]:
    """``delegation_verdicts.read``: a MemoryError is this process's limit (``OverLimit``)
    when it had used half of it, otherwise the parser's own depth (``NESTED``)."""
    try:
        return delegation.read(source, rule, own)
    except MemoryError:
        if _status("VmPeak") > _LIMIT[0]:
            raise OverLimit from None
        return {"verdict": delegation.NESTED, "imports": set(), "exports": [], "takes": []}


def names(text: str, wanted: set[str]) -> tuple[list[str], list[str]]:
    """Of ``wanted``, those a notebook cell defines at its top level (def, class, import,
    assignment) and those it uses anywhere as a name: what ``grader.integrations.routes.kernel``
    needs of the cell. None of either where it does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        if _LIMIT[0] and _status("VmPeak") > _LIMIT[0]:
            raise OverLimit from None
        return [], []
    defined: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return sorted(defined & wanted), sorted(used & wanted)


def send(conn: socket.socket, reply: dict[str, Any]) -> None:
    data = json.dumps(reply).encode()
    conn.sendall(len(data).to_bytes(4, "little") + data)
