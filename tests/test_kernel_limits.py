"""The kernel's limits on a worker: its own control group (issue 19, case 5).

Rlimits leave out what these attacks use: ``RLIMIT_DATA`` does not count shared memory, and a
student's 64 allowed busy processes took the CPU a classmate graded beside them needed. Each
test loads a student file straight into a worker (its code runs at import, past the source rule,
which would refuse its ``import os``), as the engine does.
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
from grader.sandbox.isolation import Sandbox, StudentError, WorkerLost

pytestmark = pytest.mark.skipif(cgroups.available() is not None,
                                reason=f"no per-worker cgroups here: {cgroups.available()}")

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


def test_shared_memory_counts_toward_the_memory_limit(tmp):
    """1 GiB of MAP_SHARED pages under a 256 MiB limit: held before (RLIMIT_DATA does not see
    them), stopped by the kernel now, with a reason that says so."""
    sandbox, student = loaded(tmp, """
        import mmap
        hoard = mmap.mmap(-1, 1 << 30, flags=mmap.MAP_SHARED)
        for page in range(0, 1 << 30, 4096):
            hoard[page] = 1
    """, Limits(memory=256 * MiB, timeout=30))
    with sandbox, pytest.raises((WorkerLost, StudentError)) as lost:
        student.load()
    assert "out of memory: the worker used more than 0.25 GiB (shared memory included)" in str(
        lost.value)


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


def test_a_students_busy_processes_get_one_cpu_and_stay_in_their_group(tmp):
    """Four busy processes (the old limit let 64 run) are throttled to one CPU, and every one of
    them is in the worker's own group in each hierarchy."""
    sandbox, student = loaded(tmp, """
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
    """, Limits(timeout=30))
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
        printed = sandbox.output()
    assert "groups []" in printed
    assert "sys True" in printed  # the rest of /sys is still there (CPU topology, for NumPy)
