"""The kernel's limits on a worker: its own control group where one can be made (issue 19, case
5), the rlimits and namespace counts of ``grader.sandbox.bounds`` elsewhere (issue 37), and
everywhere the seccomp filter (``grader.sandbox.seccomp``, issue 44).

Rlimits alone left out what these attacks use: ``RLIMIT_DATA`` does not count shared memory,
``memfd_create``, SysV segments and a tmpfs in a user namespace of one's own hold memory no
mapping counts, a student's processes were counted per uid (every worker of a user grading
without root shares one), and a student's 64 allowed busy processes took the CPU a classmate
graded beside them needed. Each test loads a student file straight into a worker (its code runs
at import, past the source rule, which would refuse its ``import os``, and past the worker's
audit hook, which would end it at its first ``mmap`` or ``fork``), as the engine does.

These run twice in ``make test``: as root (here, with the memory, pids and cpu controllers) and
as uid 65534 (``tests/test_as_user.py``: user namespaces and rlimits, no cgroup delegated).
Where a bound is weaker without a cgroup, the test says which, as the README does.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from submission_tools import EXERCISES

from grader.core.engine import copy_submission
from grader.core.student import Student
from grader.sandbox import cgroups
from grader.sandbox.confine import Limits, MiB
from grader.sandbox.errors import StudentError, WorkerLost
from grader.sandbox.isolation import Sandbox

GROUPED = cgroups.controllers()  # () where each worker is bounded by rlimits alone


@pytest.fixture(autouse=True)
def past_the_audit_hook(monkeypatch):
    """The kernel's bounds are tested on their own: the hook above them is switched off."""
    from grader.core import student

    monkeypatch.setattr(student, "_audited", lambda: False)

SOFTMAX = """
import numpy as np


def softmax(logits, axis=-1):
    x = np.asarray(logits, dtype=np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
"""


def loaded(tmp: Path, source: str, limits: Limits) -> tuple[Sandbox, Student]:
    staged, folder = tmp / "staged", tmp / "submission"
    staged.mkdir()
    folder.mkdir()
    (staged / "softmax.py").write_text(textwrap.dedent(source) + SOFTMAX)
    copy_submission(staged, folder)
    sandbox = Sandbox(folder, "softmax", limits=limits, framework="numpy")
    student = Student(sandbox, EXERCISES["softmax"])
    return sandbox, student


@pytest.fixture
def tmp():
    folder = Path(tempfile.mkdtemp(prefix="kernel-limits-"))
    os.chmod(folder, 0o755)  # the worker runs as a sandbox uid
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def printed(sandbox: Sandbox, word: str) -> list[int]:
    """The numbers the student's code printed after ``word``."""
    return [int(line.split()[1]) for line in sandbox.output().splitlines()
            if line.startswith(f"{word} ")]


def test_shared_memory_counts_toward_the_memory_limit(tmp):
    """1 GiB of MAP_SHARED pages under a 256 MiB limit: held before (RLIMIT_DATA does not see
    them); now the kernel stops the worker (a memory group), or refuses the mapping at once
    (RLIMIT_AS, which counts shared mappings)."""
    sandbox, student = loaded(tmp, """
        import mmap
        hoard = mmap.mmap(-1, 1 << 30, flags=mmap.MAP_SHARED)
        for page in range(0, 1 << 30, 4096):
            hoard[page] = 1
    """, Limits(memory=256 * MiB, timeout=30))
    with sandbox, pytest.raises((WorkerLost, StudentError)) as lost:
        student.load()
    if "memory" in GROUPED:
        assert "out of memory: the worker used more than 0.25 GiB (shared memory included)" in (
            str(lost.value))
    else:
        assert "OSError: [Errno 12] Cannot allocate memory" in str(lost.value), lost.value


HOARDS = """
    import ctypes, mmap, os
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    TARGET, CHUNK = 768 << 20, 16 << 20  # a file may hold 16 MiB (RLIMIT_FSIZE)
    kept = []

    def memfd():  # anonymous files, filled by write(): no mapping to count
        held = 0
        while held < TARGET:
            fd = os.memfd_create("hoard")
            kept.append(fd)
            for _ in range(CHUNK >> 20):
                os.write(fd, b"x" * (1 << 20))
            held += CHUNK
        return held

    def sysv():  # segments attached, filled and detached: they keep their pages
        held = 0
        while held < TARGET:
            key = libc.shmget(0, CHUNK, 0o1600)
            if key < 0:
                raise OSError(ctypes.get_errno(), "shmget")
            address = libc.shmat(key, None, 0)
            if address in (None, ctypes.c_void_p(-1).value):
                raise OSError(ctypes.get_errno(), "shmat")
            ctypes.memset(address, 1, CHUNK)
            libc.shmdt(ctypes.c_void_p(address))
            held += CHUNK
        return held

    def tmpfs():  # a user namespace of its own, where it may mount a tmpfs of any size
        uid, gid = os.geteuid(), os.getegid()
        if libc.unshare(0x10000000 | 0x00020000) != 0:  # CLONE_NEWUSER | CLONE_NEWNS
            raise OSError(ctypes.get_errno(), "unshare")
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                           ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)
        if libc.mount(b"none", b"/tmp", b"tmpfs", 0, b"size=4g") != 0:
            raise OSError(ctypes.get_errno(), "mount")
        held = 0
        while held < TARGET:
            with open(f"/tmp/hoard-{held}", "wb") as handle:
                for _ in range(CHUNK >> 20):
                    handle.write(b"x" * (1 << 20))
            held += CHUNK
        return held

    for hoard in (memfd, sysv, tmpfs):
        try:
            print(hoard.__name__, hoard(), flush=True)
        except OSError as error:
            print(hoard.__name__, 0, error, flush=True)
"""


def test_memory_no_mapping_counts_is_refused_or_counted(tmp):
    """memfd files, detached SysV segments and a tmpfs in a nested user namespace: 768 MiB of
    each under a 128 MiB limit, none of it mapped when counted. The seccomp filter refuses all
    three, with a memory group or without (as uid 65534 on 4e1a685 the worker held 768 MiB of
    each; as root a memory group charged it, and the kernel stopped the worker)."""
    limits = Limits(memory=128 * MiB, timeout=30)
    sandbox, student = loaded(tmp, HOARDS, limits)
    with sandbox:
        student.load()
        held = {name: printed(sandbox, name) for name in ("memfd", "sysv", "tmpfs")}
        assert held == {"memfd": [0], "sysv": [0], "tmpfs": [0]}, sandbox.output()


def test_a_workers_processes_are_counted_as_its_own(tmp):
    """Up to 100 children, each alive until the worker ends: at most the worker's 64 processes
    (``Limits.processes``), whoever else this user runs. As uid 65534 on 4e1a685 all 100
    started (nothing counted a worker's processes without root)."""
    sandbox, student = loaded(tmp, """
        import os, threading
        started = 0
        for _ in range(100):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                threading.Event().wait(60)  # a futex: the filter allows no other sleep
                os._exit(0)
            started += 1
        print("started", started, flush=True)
    """, Limits(timeout=30))
    with sandbox:
        student.load()
        (started,) = printed(sandbox, "started")
    assert 0 < started < Limits().processes, started


def cpu_seconds(pids: set[str]) -> float:
    """User and system time of ``pids`` (host pids), as /proc counts it."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> set[str]:
    """The host pids of ``pid``'s children and theirs."""
    found, todo = set(), [str(pid)]
    while todo:
        parent = todo.pop()
        try:
            children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
        except OSError:
            continue
        found |= set(children)
        todo += children
    return found


BUSY = """
    import os, time
    children = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            end = time.monotonic() + 20
            while time.monotonic() < end:
                pass
            os._exit(0)
        children.append(pid)
    print("children", *children, flush=True)
"""


@pytest.mark.skipif("cpu" not in GROUPED, reason="no cgroup here: no CPU share (the README's "
                    "'What the kit cannot promise'); the processes still end with the worker: "
                    "test_busy_processes_end_with_their_worker")
def test_a_students_busy_processes_get_one_cpu_and_stay_in_their_group(tmp):
    """Four busy processes (the old limit let 64 run) are throttled to one CPU, and every one of
    them is in the worker's own group in each hierarchy."""
    sandbox, student = loaded(tmp, BUSY, Limits(timeout=30))
    with sandbox:
        student.load()
        group = sandbox.group
        assert group is not None
        procs = set()
        for folder in group.folders.values():
            procs |= set((folder / "cgroup.procs").read_text().split())
        assert len(procs) >= 4 + 2  # the busy four, the worker, the keeper and init
        cpu = group.folders["cpu"].parent
        if cgroups.hierarchy().version == 1:
            assert (cpu / "cpu.cfs_quota_us").read_text().strip() == str(cgroups.CPU_PERIOD_US)
        else:
            assert (cpu / "cpu.max").read_text().split()[0] == str(cgroups.CPU_PERIOD_US)
        # What they used over two seconds, by the kernel's account: at most one CPU's worth
        # (without the cap, on two idle cores, about two). An upper bound: a loaded machine
        # gives them less, never more.
        before, start = cpu_seconds(procs), time.monotonic()
        time.sleep(2.0)
        used, wall = cpu_seconds(procs) - before, time.monotonic() - start
        assert used <= 1.15 * wall * cgroups.STUDENT_CPUS, (used, wall)
        student_memory = group.folders["memory"].parent / (
            "memory.limit_in_bytes" if cgroups.hierarchy().version == 1 else "memory.max")
        assert int(student_memory.read_text()) == (  # the key's worker shares the student's
            Limits().memory + 2 * cgroups.MEMORY_HEADROOM)
        assert int((group.folders["pids"] / "pids.max").read_text()) == (
            Limits().processes + cgroups.PROCESSES_OF_THE_KIT)
    cgroups.settle()  # what a grading run does once graded: groups whose keeper was leaving
    for folder in group.folders.values():  # gone with the worker
        assert not folder.exists()


def test_busy_processes_end_with_their_worker(tmp):
    """However they detach, the four busy processes are gone once their worker is: the
    kernel ends a PID namespace's processes with its init, in every mode. Without a cgroup,
    that and each process's CPU limit (RLIMIT_CPU) are all that bound them: there is no CPU
    share (``cgroups.NO_CPU``)."""
    sandbox, student = loaded(tmp, BUSY, Limits(timeout=30))
    with sandbox:
        student.load()
        busy = descendants(sandbox.worker_pid())
        assert len(busy) == 4, busy
    assert all(not Path(f"/proc/{pid}").exists() for pid in busy)
    if "cpu" not in GROUPED:
        assert cgroups.NO_CPU in cgroups.missing_limits()


def test_a_worker_sees_no_groups_so_no_peak_carries_from_one_worker_to_the_next(tmp):
    """The red team's channel: one exercise's worker raised its student's group's memory peak
    and a later worker read it from /sys/fs/cgroup. A worker's view has that folder empty."""
    sandbox, student = loaded(tmp, """
        import os
        print("groups", sorted(os.listdir("/sys/fs/cgroup")), flush=True)
        print("sys", os.path.isdir("/sys/devices"), flush=True)
    """, Limits(timeout=30))
    with sandbox:
        student.load()
        text = sandbox.output()
    assert "groups []" in text
    assert "sys True" in text  # the rest of /sys is still there (CPU topology, for NumPy)
