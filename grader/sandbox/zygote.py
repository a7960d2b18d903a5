"""The zygote: a clean process that forks every worker.

A worker must not be a fork of a process that holds the kit (its references are answers), so
the grading process never forks workers itself. It starts this zygote once, as a fresh
interpreter in isolated mode (``python -I``) that is sent the sources of the sandbox modules
(``SOURCES``: protocol, seccomp, bounds, confine, mounts, operators, operation_helpers, audit,
worker and this one) and imports the modules in ``PRELOAD``: nothing else of the kit, and the kit is
not on its import path. There is one zygote per framework: the NumPy exercises' zygote never
imports torch (nor scipy, jax or tensorflow), so no object of theirs is in a NumPy worker's
memory; the torch exercises' zygote imports torch and blocks torch's attention operators at
its dispatcher (``operators.block_attention``) before any worker is forked. Each grading
process then connects to the zygote's socket and asks for workers.

For each worker the zygote forks a *keeper*, which enters new namespaces (``confine``) and forks
their *init* (PID 1: it builds the worker's view of the files (``mounts``), reaps, and when the
worker ends, ends, which ends every process of the namespace), which forks the *worker* (PID
2). The keeper tells the grading process init's pid, then the worker's wait status when it
ends; when the grading process asks (``k``) or goes away, the keeper kills init, and with it
the namespace.

Request (on the zygote's socket): a ``protocol`` message ``{"config", "confine"}`` with three
descriptors: the worker's end of its request socket, the file that captures its output, and
the keeper's end of the status socket. Status lines: ``pid N``, then ``exit STATUS``.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import json
import os
import select
import signal
import socket
import sys
from typing import Any

from . import confine, mounts, operators, protocol, worker

SOURCES = ("protocol", "seccomp", "bounds", "confine", "mounts", "operators", "operation_helpers",
           "audit", "worker", "zygote")
# A torch worker that calls one of torch's attention operators ends with this exit code
# (``operators.block_attention``); the grading process reports it as a broken rule.
EXIT_FORBIDDEN = 86

# Runs in a fresh `python -I -c BOOT SOCKET_PATH`: reads the sources of the sandbox modules as one
# JSON object from stdin, loads them as the package `_sandbox` and calls `zygote.main`. Stdin
# stays open: when the grading process that started the zygote goes away, the zygote ends.
BOOT = r"""
import json, sys, types
line = sys.stdin.buffer.readline()
sources = json.loads(line)
package = types.ModuleType("_sandbox")
package.__path__ = []
sys.modules["_sandbox"] = package
for name in ("protocol", "seccomp", "bounds", "confine", "mounts", "operators",
             "operation_helpers", "audit", "worker", "zygote"):
    module = types.ModuleType("_sandbox." + name)
    module.__package__ = "_sandbox"
    sys.modules[module.__name__] = module
    setattr(package, name, module)
    exec(compile(sources[name], "<sandbox " + name + ">", "exec"), module.__dict__)
sys.modules["_sandbox.zygote"].main(*sys.argv[1:])
"""


def forget_the_kit() -> None:
    """Take every import route to the kit out of this interpreter (an editable install puts a
    finder for the kit's package on ``sys.meta_path``)."""
    sys.meta_path[:] = [f for f in sys.meta_path
                        if "editable" not in getattr(f, "__module__", "").lower()
                        and "editable" not in type(f).__name__.lower()
                        and "editable" not in getattr(f, "__name__", "").lower()]
    sys.path_hooks[:] = [h for h in sys.path_hooks
                         if "editable" not in getattr(h, "__qualname__", "").lower()]
    for name in [n for n in sys.modules if "editable" in n.lower()]:
        del sys.modules[name]
    sys.path_importer_cache.clear()


def preload(framework: str) -> None:
    for name in confine.PRELOAD[framework]:
        with contextlib.suppress(Exception):
            __import__(name)
    mounts.visible_paths()  # once, not in every worker's init
    if mounts.PACKAGES[framework] is not None:
        mounts.packaged(tuple(mounts.PACKAGES[framework]))
    if framework != "torch":
        return
    import torch

    torch.set_num_threads(1)  # small tensors gain nothing from threads
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)
    # Before any worker exists: a worker's fd 2 is its captured output.
    operators.block_attention(EXIT_FORBIDDEN, 2)


def main(path: str, framework: str, many: str = "") -> None:
    forget_the_kit()
    preload(framework)
    # What is loaded now is in every worker: out of the collector's passes, so a worker's
    # collections neither walk torch's objects nor copy the pages they sit on.
    gc.freeze()
    if many and framework == "torch":  # a class's workers to fork: worth the collapse
        huge_pages()  # (NumPy's image is small: its forks gain nothing measurable)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    clients: list[socket.socket] = []
    while True:
        readable, _, _ = select.select([sys.stdin, listener, *clients], [], [], 1.0)
        with contextlib.suppress(ChildProcessError):  # the keepers that ended (their CPU time
            while os.waitpid(-1, os.WNOHANG)[0]:  # then counts as the grading run's)
                pass
        if sys.stdin in readable and not sys.stdin.buffer.read1(1):
            with contextlib.suppress(OSError):  # the grading process that started us is gone
                os.unlink(path)
                os.rmdir(os.path.dirname(path))
            os._exit(0)
        if listener in readable:
            client, _ = listener.accept()
            clients.append(client)
        for client in [c for c in clients if c in readable]:
            try:
                request, fds = receive(client)
            except (EOFError, OSError, protocol.ProtocolError, ValueError):
                clients.remove(client)
                client.close()
                continue
            try:
                spawn(request, fds, [listener, *clients])
                protocol.send(client, {"ok": True})
            except Exception as error:  # a broken request: the grading process says why
                protocol.send(client, {"ok": False, "error": repr(error)})
            finally:
                for fd in fds:
                    os.close(fd)


# madvise(2): make a range of anonymous memory into huge pages now (Linux 6.1).
MADV_COLLAPSE = 25
HUGE = 1 << 21


def huge_pages() -> int:
    """Put this process's anonymous memory (the heap and the interpreter's arenas) into 2 MiB
    pages where the kernel can, and return the bytes collapsed (0 where it cannot).

    A fork copies the page tables of its parent's anonymous memory, and an exit frees them:
    most of what a fork of a torch zygote (three per worker) or of a batch's grading process
    costs the kernel. In 2 MiB pages, a fork copies one entry where it copied 512: a torch
    worker's start and stop took 26 ms of CPU instead of 43-50, and a fork of the batch's
    grading process 4 ms instead of 12. What a child then writes is copied 4 KiB at a time, as
    before. The collapse itself copies the memory once (0.2 s for torch's 130 MiB), so it pays
    only where many forks follow: a batch, not one `grade`."""
    import ctypes

    try:
        madvise = confine._libc().madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        with open("/proc/self/maps") as handle:
            lines = handle.read().splitlines()
    except (OSError, AttributeError):
        return 0
    done = 0
    for line in lines:
        fields = line.split()
        if len(fields) < 5 or fields[1] != "rw-p" or (len(fields) > 5
                                                       and fields[5] != "[heap]"):
            continue
        low, high = (int(x, 16) for x in fields[0].split("-"))
        low, high = -(-low // HUGE) * HUGE, high // HUGE * HUGE
        if high > low and madvise(low, high - low, MADV_COLLAPSE) == 0:
            done += high - low
    return done


def receive(client: socket.socket) -> tuple[dict[str, Any], list[int]]:
    size = int.from_bytes(protocol.read_exact(client, 8), "little")
    data, fds, _, _ = socket.recv_fds(client, size, 3)
    while len(data) < size:
        more = client.recv(size - len(data))
        if not more:
            raise EOFError
        data += more
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ValueError("a spawn request carries three descriptors")
    return json.loads(data), fds


def request_bytes(request: dict[str, Any]) -> bytes:
    data = json.dumps(request).encode()
    return len(data).to_bytes(8, "little") + data


def spawn(request: dict[str, Any], fds: list[int], listening: list[socket.socket]) -> None:
    if os.fork():
        return
    code = 0
    try:
        for sock in listening:
            sock.close()
        keeper(request["config"], request["confine"], *fds)
    except BaseException:
        code = 70
    finally:
        os._exit(code)


def keeper(config: dict[str, Any], options: dict[str, Any], work_fd: int, output_fd: int,
           status_fd: int) -> None:
    """The worker's parent: namespaces in, the worker's pid and wait status out."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for procs in options.get("cgroups") or []:  # before anything is forked: all of it inside
        with open(procs, "w") as handle:
            handle.write("0")
    os.setsid()
    confine.close_inherited((work_fd, output_fd, status_fd))
    status = socket.socket(fileno=status_fd)
    mode = confine.enter_namespaces(bool(options["network"]))
    told, tell = os.pipe()  # the namespace's init tells the worker's own wait status
    pid = os.fork()
    if pid == 0:
        status.close()
        os.close(told)
        if mode:
            init(config, options, mode, work_fd, output_fd, tell)
        run_worker(config, options, mode, work_fd, output_fd)
    for fd in (work_fd, output_fd, tell):
        os.close(fd)
    status.sendall(f"pid {pid} {mode or 'plain'}\n".encode())
    try:
        handle = os.pidfd_open(pid)
    except (AttributeError, OSError):
        handle = None
    while True:
        ready, _, _ = select.select([status, *([handle] if handle is not None else [])], [], [],
                                    None if handle is not None else 0.05)
        done, result = os.waitpid(pid, os.WNOHANG)
        if done:
            with contextlib.suppress(OSError, ValueError):
                result = int(os.read(told, 64) or result)  # the worker's, not init's
            break
        if status in ready:
            with contextlib.suppress(OSError):
                if status.recv(64):
                    pass  # "k": the grading process wants the worker gone
            # asked, or the grading process is gone: end the worker and its namespace
            kill(pid, mode)
            _, result = os.waitpid(pid, 0)
            break
    with contextlib.suppress(OSError):
        status.sendall(f"exit {result}\n".encode())


def kill(pid: int, mode: str) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # without a PID namespace, its session at least
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)  # PID 1 of a namespace: the kernel kills all of it


def init(config: dict[str, Any], options: dict[str, Any], mode: str, work_fd: int,
         output_fd: int, tell: int) -> None:
    """PID 1 of the worker's namespaces: builds its view of the files, starts the worker as
    PID 2 (so the student's code gets the signals a process gets), reaps what it leaves, and
    when the worker ends, tells its wait status and ends, and the kernel ends the rest."""
    code = 0
    try:
        # First for the out-of-memory killer, inherited by the worker: set here, in the
        # machine's /proc, since the worker's own is read-only (``confine.bounds``).
        confine.bounds.first_for_the_oom_killer()
        if not options["trusted"]:
            mounts.private_view(config["folder"], options["scratch"], options.get("packages"))
        wait, go = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(tell)
            os.close(go)
            os.read(wait, 1)  # until its /proc entry is sealed
            os.close(wait)
            run_worker(config, options, mode, work_fd, output_fd)
        os.close(wait)
        if not options["trusted"]:
            mounts.seal_proc(pid)
        os.write(go, b"x")
        os.close(go)
        os.close(work_fd)
        os.close(output_fd)
        while True:
            done, status = os.waitpid(-1, 0)
            if done == pid:
                os.write(tell, str(status).encode())
                break
    except BaseException:
        code = 71
        with contextlib.suppress(Exception):  # the kit's own failure: for the instructor
            import traceback

            os.write(output_fd, traceback.format_exc().encode())
    finally:
        os._exit(code)


def run_worker(config: dict[str, Any], options: dict[str, Any], mode: str, work_fd: int,
               output_fd: int) -> None:
    """The worker: its limits, then the request loop (never returns)."""
    code = 0
    # Held by this frame until os._exit: a socket dropped with a frame that an exception freed
    # (a MemoryError in ``serve``) warned "unclosed socket" into the output on some runs only.
    sock = None
    try:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(output_fd)
        os.close(devnull)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        faulthandler.enable(file=sys.stderr)  # a crash's traceback goes to the capture
        user = options.get("user")
        as_root = os.geteuid() == 0 and mode != "user"
        confine.restrict(confine.Limits(timeout=options["timeout"], memory=options["memory"],
                                        processes=options["processes"]),
                         tuple(user) if user and as_root else None, config["folder"],
                         mode=mode, grouped=options.get("grouped") or ())
        sock = socket.socket(fileno=work_fd)
        worker.serve(sock, config, audited=not options["trusted"])
    except BaseException:
        code = 70
        with contextlib.suppress(Exception):  # the kit's own failure: for the instructor
            import traceback

            traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
