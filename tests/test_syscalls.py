"""The workers' seccomp filter (``grader/sandbox/seccomp.py``): honest work makes no call it
refuses, its numbers are the kernel's, and what it refuses gains a student nothing, as root and
as uid 65534 (``tests/test_as_user.py`` reruns this file as that user).

The attacks (issue 44) are one student's ``softmax.py`` run in a worker as the grading process
starts one (``Sandbox``), as ``tests/test_red_team_red37.py`` runs its own: the source rule would
refuse the file (it imports ``os`` and ``ctypes``), and no guarantee rests on it. They run one
after another in one worker, in a process of their own (``python tests/test_syscalls.py``, whose
zygote starts afresh), and after them the file's honest ``softmax`` still answers. What each did
before the filter allowed only what a worker needs, as root (whose workers had no filter) and
as uid 65534 (whose filter was a list of refused calls) alike:

- ``io_uring``: a ring set up, and through it ``SO_SNDBUF`` set on a socket: 8 MiB where the
  machine's default is 208 KiB, as a user too, whose filter refused ``setsockopt(SO_SNDBUF)``
  itself (one such process held 784 MiB of a worker whose ``--memory`` was 0.25 GiB);
- ``locks``: a shared ``flock`` and a POSIX read lock (``F_SETLK``) on NumPy's ``__init__.py``,
  which every worker and every user may read, both seen by the grading process from outside (a
  channel to any process of any user on the machine);
- ``pipe``: a pipe grown to 1 MiB (``F_SETPIPE_SZ``), 16 times its default;
- ``mincore``: which pages of a shared library file are in memory, read (what another worker
  touched: bits carried between workers);
- ``ptrace``: a child of the worker asked to be traced, stopped, and the worker resumed it;
- ``personality``: the worker changed its personality (``ADDR_NO_RANDOMIZE``, for whatever it
  starts next);
- ``memory_map``: ``prctl(PR_SET_MM)`` answered (the call that rewrites where the kernel reads a
  process's command line and environment).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve()
KIT = HERE.parents[1]
sys.path.insert(0, str(KIT))

from grader.sandbox import seccomp  # noqa: E402
from tools import trace_syscalls  # noqa: E402

SYSCALLS = {  # io_uring_setup, io_uring_enter, mincore, ptrace, personality
    "x86_64": (425, 426, 27, 101, 135),
    "aarch64": (425, 426, 232, 117, 92),
}

ATTACKS = '''
import ctypes
import fcntl
import mmap
import os
import socket
import struct
import time

import numpy as np

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
IO_URING_SETUP, IO_URING_ENTER, MINCORE, PTRACE, PERSONALITY = {syscalls}
HELD = []  # what the worker holds while the grading process looks


def outcome(gained, error=0, *more):
    return np.array([float(gained), float(error), *map(float, more)])


class SqOffsets(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in (
        "head", "tail", "ring_mask", "ring_entries", "flags", "dropped", "array", "resv1")] + [
        ("user_addr", ctypes.c_uint64)]


class CqOffsets(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in (
        "head", "tail", "ring_mask", "ring_entries", "overflow", "cqes", "flags", "resv1")] + [
        ("user_addr", ctypes.c_uint64)]


class Params(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in (
        "sq_entries", "cq_entries", "flags", "sq_thread_cpu", "sq_thread_idle", "features",
        "wq_fd", "resv0", "resv1", "resv2")] + [("sq_off", SqOffsets), ("cq_off", CqOffsets)]


def io_uring():
    """Through a ring: setsockopt(SO_SNDBUF) as a socket command (IORING_OP_URING_CMD)."""
    params = Params()
    ring = libc.syscall(IO_URING_SETUP, 4, ctypes.byref(params))
    if ring < 0:
        return outcome(0, ctypes.get_errno())
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    HELD.append(sock)
    before = sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    shared = mmap.MAP_SHARED
    both = mmap.PROT_READ | mmap.PROT_WRITE
    size = max(params.sq_off.array + 4 * params.sq_entries,
               params.cq_off.cqes + 16 * params.cq_entries)
    rings = mmap.mmap(ring, size, shared, both, offset=0)
    cq = rings if params.features & 1 else mmap.mmap(ring, size, shared, both, offset=0x8000000)
    sqes = mmap.mmap(ring, 64 * params.sq_entries, shared, both, offset=0x10000000)
    value = ctypes.c_int(64 << 20)
    sqe = bytearray(64)
    struct.pack_into("<BBHi", sqe, 0, 46, 0, 0, sock.fileno())  # IORING_OP_URING_CMD
    struct.pack_into("<I", sqe, 8, 3)  # SOCKET_URING_OP_SETSOCKOPT
    struct.pack_into("<II", sqe, 16, socket.SOL_SOCKET, socket.SO_SNDBUF)
    struct.pack_into("<I", sqe, 44, 4)  # optlen
    struct.pack_into("<Q", sqe, 48, ctypes.addressof(value))
    sqes[0:64] = bytes(sqe)
    tail = struct.unpack_from("<I", rings, params.sq_off.tail)[0]
    mask = struct.unpack_from("<I", rings, params.sq_off.ring_mask)[0]
    struct.pack_into("<I", rings, params.sq_off.array + 4 * (tail & mask), 0)
    struct.pack_into("<I", rings, params.sq_off.tail, tail + 1)
    libc.syscall(IO_URING_ENTER, ring, 1, 1, 1, None, 0)  # IORING_ENTER_GETEVENTS
    head = struct.unpack_from("<I", cq, params.cq_off.head)[0]
    mask = struct.unpack_from("<I", cq, params.cq_off.ring_mask)[0]
    result = struct.unpack_from("<i", cq, params.cq_off.cqes + 16 * (head & mask) + 8)[0]
    after = sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    return outcome(after > before, -min(result, 0), before, after)


def locks():
    """A shared flock and a POSIX read lock on a file every user may read, held."""
    found = []
    for take in (lambda fd: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB),
                 lambda fd: fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)):
        fd = os.open(np.__file__, os.O_RDONLY)
        HELD.append(fd)
        try:
            take(fd)
            found += [1, 0]
        except OSError as error:
            found += [0, error.errno]
    return np.array(found, dtype=float)


def pipe():
    """A pipe grown to 1 MiB; and F_SETPIPE_SZ on /dev/null, which the kernel answers EBADF."""
    found = []
    try:
        fcntl.fcntl(0, fcntl.F_SETPIPE_SZ, 1 << 20)
        found += [1, 0]
    except OSError as error:
        found += [0, error.errno]
    try:
        read, write = os.pipe()
        HELD.extend((read, write))
        found += [fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 1 << 20), 0]
    except OSError as error:
        found += [0, error.errno]
    return np.array(found, dtype=float)


def mincore():
    """Which pages of NumPy's shared library are in memory."""
    library = next(os.path.join(folder, name)
                   for folder, _, names in os.walk(os.path.dirname(np.__file__))
                   for name in names if name.startswith("_multiarray_umath"))
    fd = os.open(library, os.O_RDONLY)
    size = os.fstat(fd).st_size
    address = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
    pages = (size + 4095) // 4096
    vector = (ctypes.c_ubyte * pages)()
    if libc.syscall(MINCORE, ctypes.c_void_p(address), ctypes.c_size_t(size), vector) != 0:
        return outcome(0, ctypes.get_errno())
    return outcome(1, 0, sum(v & 1 for v in vector), pages)


def ptrace():
    """A child of its own asks to be traced by the worker, stops, and the worker resumes it."""
    answer = mmap.mmap(-1, 4096)  # shared with the child: its errno, then a mark
    child = os.fork()
    if child == 0:
        traced = libc.ptrace(0, 0, None, None) == 0  # PTRACE_TRACEME
        answer[0:5] = struct.pack("<iB", 0 if traced else ctypes.get_errno(), 1)
        if traced:
            os.kill(os.getpid(), 19)  # SIGSTOP: its tracer sees it stop
        os._exit(0)
    for _ in range(10 ** 8):  # no call of the kernel while it waits: only the attack's
        if answer[4]:
            break
    error = struct.unpack("<i", answer[0:4])[0]
    if error or not answer[4]:
        return outcome(0, error)
    os.waitpid(child, 0)
    resumed = libc.ptrace(7, child, None, None) == 0  # PTRACE_CONT
    os.waitpid(child, 0)
    return outcome(resumed, 0)


def personality():
    previous = libc.syscall(PERSONALITY, 0x0040000)  # ADDR_NO_RANDOMIZE
    if previous < 0:
        return outcome(0, ctypes.get_errno())
    libc.syscall(PERSONALITY, previous)
    return outcome(1, 0)


def memory_map():
    size = ctypes.c_uint(0)
    answered = libc.prctl(35, 15, ctypes.byref(size), 0, 0) == 0  # PR_SET_MM, _MAP_SIZE
    return outcome(answered, 0 if answered else ctypes.get_errno(), size.value)


def softmax(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
'''
NAMES = ("io_uring", "locks", "pipe", "mincore", "ptrace", "personality", "memory_map")


# -- the grading side: the attacks, in a process of its own ------------------------------------
def _seen_from_outside(path: str) -> list[bool]:
    """Whether another process sees a lock on ``path``: (a flock, a POSIX lock)."""
    import fcntl

    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            flocked = False
        except BlockingIOError:
            flocked = True
        query = struct.pack("hh4xqqi4x", fcntl.F_WRLCK, 0, 0, 0, 0)
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, query)
        return [flocked, struct.unpack("hh4xqqi4x", answer)[0] != fcntl.F_UNLCK]
    finally:
        os.close(fd)


def attack() -> dict:
    """Run every attack in one worker: what each returned, what the grading process saw of the
    locks, and the honest softmax's answer after them."""
    import numpy as np

    from grader.sandbox.errors import StudentError, WorkerLost
    from grader.sandbox.isolation import GiB, Limits, Sandbox

    folder = Path(tempfile.mkdtemp(prefix="syscalls-"))
    os.chmod(folder, 0o755)
    (folder / "softmax.py").write_text(
        ATTACKS.replace("{syscalls}", repr(SYSCALLS[os.uname().machine])))
    os.chmod(folder / "softmax.py", 0o644)
    found: dict = {}
    try:
        with Sandbox(folder, "softmax", framework="numpy",
                     limits=Limits(timeout=60, call=20, memory=GiB // 4)) as sandbox:
            found["mode"] = sandbox.mode
            # the audit hook off: these attacks import os and ctypes, which the hook (a layer
            # above, tests/test_audit_hook.py) refuses before the kernel is asked
            sandbox.request("load", functions=[*NAMES, "softmax"], siblings={}, ops={},
                            framework="numpy", audited=False)
            for name in NAMES:
                try:
                    value = sandbox.request("call", func=name, args=[], kwargs={})
                    found[name] = [float(v) for v in value]
                except StudentError as error:
                    found[name] = error.describe()
                if name == "locks":
                    found["seen_outside"] = _seen_from_outside(np.__file__)
            try:
                value = sandbox.request("call", func="softmax", args=[[0.0, 0.0]], kwargs={})
                found["softmax"] = [float(v) for v in value]
            except (StudentError, WorkerLost) as error:
                found["softmax"] = str(error)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return found


_FOUND: dict = {}


def attacked() -> dict:
    """The attacks' findings (``attack``), run once, in a process of their own."""
    if not _FOUND:
        done = subprocess.run([sys.executable, str(HERE)], cwd=KIT, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        _FOUND.update(json.loads(done.stdout.splitlines()[-1]))
    return _FOUND


needs_arch = pytest.mark.skipif(os.uname().machine not in SYSCALLS,
                                reason="the filter knows x86_64 and aarch64")
REFUSED = [0.0, float(errno.EPERM)]  # gained nothing, and the filter's answer


@needs_arch
def test_no_io_uring_ring_to_set_what_setsockopt_may_not():
    assert attacked()["io_uring"] == REFUSED  # [1, 0, 212992, 8388608] before


@needs_arch
def test_no_lock_on_a_file_every_user_may_read():
    found = attacked()
    assert found["locks"] == REFUSED + REFUSED, found  # [1, 0, 1, 0] before
    assert found["seen_outside"] == [False, False], found  # [True, True] before


@needs_arch
def test_no_pipe_and_no_pipe_size():
    # F_SETPIPE_SZ on /dev/null: the filter's EPERM, where the kernel would answer EBADF
    assert attacked()["pipe"] == REFUSED + REFUSED  # [0, EBADF, 1048576, 0] before


@needs_arch
def test_no_page_residency_read():
    assert attacked()["mincore"] == REFUSED  # [1, 0, pages in memory, pages] before


@needs_arch
@pytest.mark.parametrize("name", ["ptrace", "personality", "memory_map"])
def test_no_tracing_personality_or_memory_map(name):
    assert attacked()[name][:2] == REFUSED  # [1, 0] before


@needs_arch
def test_the_honest_function_answers_after_every_attack():
    found = attacked()
    assert found["softmax"] == [0.5, 0.5], found  # refused with an error: the worker lives


# -- the filter's program, as the kernel runs it ------------------------------------------------
ISSUE = ("io_uring_setup", "io_uring_enter", "io_uring_register", "flock", "ptrace",
         "personality", "mincore", "process_vm_readv", "process_vm_writev", "memfd_create",
         "shmget", "keyctl", "add_key", "request_key", "vmsplice", "userfaultfd",
         "perf_event_open", "bpf", "unshare", "setns", "mount", "pivot_root", "prctl",
         "socket", "socketpair", "setsockopt", "pipe2", "capset")
F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW = 5, 6, 7, 36, 37, 38
F_SETLEASE, F_NOTIFY, F_SETPIPE_SZ, F_GETPIPE_SZ, F_SETOWN = 1024, 1026, 1031, 1032, 8
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET, CLONE_PTRACE = 0x20000, 0x10000000, 0x40000000, 0x2000
FORK, THREAD = 0x01200011, 0x003D0F00
ALLOW, DENY, NOSYS = seccomp.RET_ALLOW, seccomp.RET_ERRNO | errno.EPERM, seccomp.RET_ERRNO | 38


def answer(machine: str, name: str, *args: int, nr: int | None = None,
           audit: int | None = None) -> int:
    arch = seccomp.ARCHES[machine]
    number = seccomp.number(name, machine) if nr is None else nr
    return trace_syscalls.run(seccomp.filter_program(machine), number, args,
                              arch.audit if audit is None else audit)


@pytest.mark.parametrize("machine", sorted(seccomp.ARCHES))
def test_the_calls_the_issue_names_are_refused(machine):
    assert not set(ISSUE) & set(seccomp.ALLOWED)
    for name in ISSUE:
        assert answer(machine, name) == DENY, name
    assert answer(machine, "read", 0, 0, 0) == ALLOW


@pytest.mark.parametrize("machine", sorted(seccomp.ARCHES))
def test_fcntl_keeps_descriptor_flags_and_loses_locks_pipe_sizes_and_leases(machine):
    for command in (0, 1, 2, 3, 4, 1030):  # F_DUPFD ... F_SETFL, F_DUPFD_CLOEXEC
        assert answer(machine, "fcntl", 3, command) == ALLOW, command
    for command in (F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW,
                    F_SETLEASE, F_NOTIFY, F_SETPIPE_SZ, F_GETPIPE_SZ, F_SETOWN):
        assert answer(machine, "fcntl", 3, command) == DENY, command
    # the kernel reads the command's low 32 bits: high bits hide nothing
    assert answer(machine, "fcntl", 3, (1 << 32) | F_SETLK) == DENY


@pytest.mark.parametrize("machine", sorted(seccomp.ARCHES))
def test_clone_makes_threads_and_forks_and_nothing_else(machine):
    assert answer(machine, "clone", THREAD) == answer(machine, "clone", FORK) == ALLOW
    for flag in (CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET, CLONE_PTRACE):
        assert answer(machine, "clone", FORK | flag) == DENY, hex(flag)
    assert answer(machine, "clone3") == NOSYS  # glibc falls back to clone


@pytest.mark.parametrize("machine", sorted(seccomp.ARCHES))
def test_another_architectures_calls_and_newer_calls_get_enosys(machine):
    arch = seccomp.ARCHES[machine]
    assert answer(machine, "read", audit=0x40000003) == NOSYS  # i386's int 0x80
    assert answer(machine, "read", nr=arch.last + 1) == NOSYS
    if arch.x32:
        assert answer(machine, "read", nr=seccomp.X32_BIT) == NOSYS


def test_amx_permission_is_all_arch_prctl_allows():
    for option in (0x1021, 0x1022, 0x1023):  # ARCH_GET_XCOMP_SUPP, _GET_XCOMP_PERM, _REQ_
        assert answer("x86_64", "arch_prctl", option) == ALLOW
    for option in (0x1001, 0x1002, 0x1012, 0x2001):  # SET_GS, SET_FS, SET_CPUID, MAP_VDSO
        assert answer("x86_64", "arch_prctl", option) == DENY


# -- the table: the kernel's numbers --------------------------------------------------------------
GENERIC = Path("/usr/include/asm-generic/unistd.h")  # aarch64's table (linux-libc-dev)


@pytest.mark.skipif(not GENERIC.is_file(), reason=f"{GENERIC} is not installed")
def test_aarch64_numbers_are_the_generic_tables():
    import re

    text = GENERIC.read_text()
    known = {m[1]: int(m[2]) for m in re.finditer(r"#define __NR(?:3264)?_(\w+) (\d+)", text)}
    known["newfstatat"] = known.pop("fstatat")
    table = {name: numbers[1] for name, numbers in seccomp.CALLS.items()
             if numbers[1] is not None and name in known}
    assert table == {name: known[name] for name in table}
    # what the header lacks is newer than it
    assert all(numbers[1] >= known["syscalls"] for name, numbers in seccomp.CALLS.items()
               if numbers[1] is not None and name not in known)


NAMED = '''
import ctypes, os, struct, sys
numbers = [int(n) for n in sys.argv[1:]]
exit_group = numbers.pop()
program = [(0x20, 0, 0, 0), (0x15, 0, 1, exit_group), (0x06, 0, 0, 0x7FFF0000),
           (0x06, 0, 0, 0x50026)]  # every call but exit_group refused (ENOSYS): none runs
code = b"".join(struct.pack("<HBBI", *i) for i in program)
buffer = ctypes.create_string_buffer(code, len(code))
class Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
libc = ctypes.CDLL(None, use_errno=True)
call = libc.syscall
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.byref(Program(len(program), ctypes.addressof(buffer))), 0, 0) == 0
for number in numbers:
    call(number, 0, 0, 0, 0, 0)
os._exit(0)
'''


@pytest.mark.skipif(shutil.which("strace") is None or os.uname().machine not in seccomp.ARCHES,
                    reason="needs strace, on x86_64 or aarch64")
def test_this_machines_numbers_are_the_ones_strace_names(tmp_path):
    """Each number of this machine's column, called under a filter that refuses it, is named
    by strace as the table names it."""
    import re

    table = {seccomp.number(name): name for name in seccomp.CALLS
             if seccomp.number(name) is not None and name != "exit_group"}
    output = tmp_path / "trace.txt"
    done = subprocess.run(["strace", "-qq", "-n", "-o", str(output), sys.executable, "-c", NAMED,
                           *map(str, table), str(seccomp.number("exit_group"))],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0 and "ptrace" in done.stderr:
        pytest.skip(f"strace cannot trace here: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stderr[-2000:]
    named = {}
    for line in output.read_text().splitlines():
        match = re.match(r"\[ *(\d+)\] (\w+)\(", line)
        if match:
            named[int(match[1])] = match[2]
    assert {number: named.get(number) for number in table} == table


# -- honest work ----------------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("strace") is None, reason="the trace needs strace")
def test_honest_workers_make_no_call_the_filter_refuses():
    """The answer key, every exercise, and the plain files (print, warnings, fresh random
    numbers, torch's threads), traced: every call their workers made under the filter is one
    it allows (or a probe it refuses by design), and every file scores full marks. It fails
    when a library's new version, a new exercise or a new path of the kit needs a new call:
    measure with ``python -m tools.trace_syscalls`` and add it to ``seccomp.ALLOWED``."""
    done = subprocess.run([sys.executable, "-m", "tools.trace_syscalls", "--corpus", "key",
                           "plain"], cwd=KIT, capture_output=True, text=True, timeout=1200)
    if done.returncode == 2 and "ptrace" in done.stderr:
        pytest.skip(f"strace cannot trace here: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0 and done.stdout.rstrip().endswith("refused: none"), (
        done.stdout[-4000:] + done.stderr[-2000:])
    workers = int(done.stdout.split(" filtered workers")[0].rsplit(" ", 1)[1])
    assert workers >= 14, done.stdout[:300]  # one worker an exercise at least: all were traced


if __name__ == "__main__":  # the attacks, run in this process: their findings as JSON
    print(json.dumps(attack()))
