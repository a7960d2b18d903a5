"""The zygotes, seen from the grading process: one per framework and grading run, started
as a fresh interpreter (``grader.sandbox.zygote`` is what runs inside), asked over its socket
for each worker (``Sandbox``, in ``grader.sandbox.isolation``)."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import protocol, served
from .zygote import BOOT, SOURCES, request_bytes

SANDBOX = Path(__file__).resolve().parent
FRAMEWORKS = ("numpy", "torch")


class Zygote:
    """The clean process every worker of one framework is forked from; one per framework and
    grading run, shared by the processes a batch forks (each connects on its own)."""

    def __init__(self, framework: str = "torch", many: bool = False) -> None:
        if framework not in FRAMEWORKS:
            raise ValueError(f"no zygote for framework {framework!r}")
        self.framework = framework
        self.folder = tempfile.mkdtemp(prefix="attention-kit-zygote-")  # 0700: root's alone
        self.path = os.path.join(self.folder, "socket")
        self.owner = os.getpid()
        self.mounts = _mount_namespace()
        sources = {name: (SANDBOX / f"{name}.py").read_text() for name in SOURCES}
        self.log = tempfile.TemporaryFile()
        # A small, fixed environment: what the grading process was started with (a course
        # secret, tokens) must not sit in the workers' memory.
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/",
               "PYTORCH_NVML_BASED_CUDA_CHECK": "1", "OMP_NUM_THREADS": "1",
               **{k: v for k, v in os.environ.items()
                  if k in ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH") or k.startswith("NVIDIA_")}}
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-c", BOOT, self.path, framework, "many" if many else ""],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, cwd="/", env=env,
        )
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(sources).encode() + b"\n")
        self.process.stdin.flush()
        self._ready = False
        self._connections: dict[int, socket.socket] = {}

    def alive(self) -> bool:
        if os.getpid() == self.owner:
            return self.process.poll() is None
        try:  # a forked child cannot wait for its parent's child: ask the kernel instead
            os.kill(self.process.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def wait_ready(self) -> None:
        if self._ready:
            return
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line != b"ready\n":
            self.log.seek(0)
            tail = self.log.read()[-2000:].decode("utf-8", "replace")
            raise RuntimeError(f"the worker zygote did not start:\n{tail}")
        self._ready = True

    def is_ready(self) -> bool:
        """Whether the zygote is ready for requests, without waiting for it."""
        if not self._ready and os.getpid() == self.owner and self.process.stdout is not None:
            if select.select([self.process.stdout], [], [], 0)[0]:
                self.wait_ready()
        return self._ready or (os.getpid() != self.owner and os.path.exists(self.path))

    def connection(self) -> socket.socket:
        pid = os.getpid()
        if pid not in self._connections:
            self.wait_ready() if pid == self.owner else None
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            for _ in range(600):  # a forked grader may ask before the zygote is listening
                try:
                    sock.connect(self.path)
                    break
                except (FileNotFoundError, ConnectionRefusedError):
                    time.sleep(0.05)
            self._connections[pid] = sock
        return self._connections[pid]

    def spawn(self, request: dict[str, Any], fds: list[int]) -> None:
        sock = self.connection()
        data = request_bytes(request)
        sock.sendall(data[:8])
        socket.send_fds(sock, [data[8:]], fds)
        reply = protocol.recv(sock)
        if not reply.get("ok"):
            raise RuntimeError(f"the zygote refused a worker: {reply.get('error')}")

    def close(self) -> None:
        for sock in self._connections.values():
            sock.close()
        self._connections.clear()
        if os.getpid() != self.owner:
            return
        served.stop(self.process, self.log, self.path, self.folder)


_ZYGOTES: dict[str, Zygote] = {}


def _mount_namespace() -> str:
    with contextlib.suppress(OSError):
        return os.readlink("/proc/self/ns/mnt")
    return ""


def zygote(framework: str = "torch", many: bool = False) -> Zygote:
    """This run's zygote for ``framework``, started on first use (``many``: it will fork a
    class's workers, ``zygote.huge_pages``). A forked child shares its parent's, unless it has
    since entered a mount namespace of its own (to hide a course folder, say): workers must
    see what their grading process sees, not what its parent saw."""
    found = _ZYGOTES.get(framework)
    if found is None or not found.alive() or found.mounts != _mount_namespace():
        found = _ZYGOTES[framework] = Zygote(framework, many)
        atexit.register(found.close)
    return found


def ready(framework: str) -> bool:
    """Whether ``framework``'s zygote can fork a worker now: started and done with its imports
    (True where none was started yet: the first worker starts it, and waits)."""
    found = _ZYGOTES.get(framework)
    return found is None or not found.alive() or found.is_ready()


def start_zygote(frameworks: set[str] | None = None, many: bool = False) -> None:
    """Start the zygotes now (those of ``frameworks``, or all), so their imports overlap with
    the grading process's own; ``many``: they will fork a class's workers."""
    for framework in FRAMEWORKS:
        if frameworks is None or framework in frameworks:
            zygote(framework, many)
