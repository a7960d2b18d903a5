"""Control groups: the kernel's own account of what one student's workers use.

Rlimits count per process (``RLIMIT_DATA`` leaves shared memory out) or per uid; a control
group counts every process in it, whatever it maps or forks. When the grading process may
make groups (root, with the memory, pids and cpu controllers of cgroup v1 or v2), it makes,
under its own group in each hierarchy::

    attention-kit/g<grading pid>/          one student: CPU share and hard cap (one CPU), and
                                           memory for all their workers together
    attention-kit/g<grading pid>/w<n>/     one worker: memory (shared memory counted), pids

and the worker's keeper joins ``w<n>`` before it forks anything (``zygote.keeper``), so the
worker and every process it starts are inside. The grading process reads the group's count
of out-of-memory kills to say why a worker died, and removes the group when it is done.
Nothing here runs in a worker: the student's code sees the limits only as the kernel
enforcing them.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
NAME = "attention-kit"
CONTROLLERS = ("memory", "pids", "cpu")
CPU_PERIOD_US = 100_000
STUDENT_CPUS = 1  # a student's workers together get at most one CPU (their --jobs slot)
PROCESSES_OF_THE_KIT = 2  # the keeper and the namespace's init sit in the group beside them
# What a worker's group holds beyond the limit the worker is given: the pages its keeper, init
# and the interpreter write before the student's code runs (copy-on-write of the zygote).
MEMORY_HEADROOM = 512 << 20
MISSING = ("shared memory (mmap MAP_SHARED, /dev/shm) is not counted in --memory",
           "one worker's processes are capped only per sandbox uid (RLIMIT_NPROC), not per "
           "worker",
           "one student's workers get no CPU cap: a CPU-hungry submission slows the others "
           "graded beside it")

_sequence = itertools.count()


@dataclass(frozen=True)
class Hierarchy:
    """Where the groups go: cgroup v2's one folder, or v1's one folder per controller (each
    the grading process's own group in that hierarchy)."""

    version: int
    folders: dict[str, Path]  # controller -> the grading process's group in its hierarchy


def _own_groups() -> dict[str, str]:
    """``/proc/self/cgroup``: controller (``""`` for v2) -> this process's group path."""
    groups = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                groups[controller] = path
    return groups


def _writable(folder: Path) -> bool:
    return folder.is_dir() and os.access(folder, os.W_OK)


@functools.lru_cache(maxsize=1)
def hierarchy() -> Hierarchy | None:
    """The hierarchy this process may make worker groups in, or None (see ``available``)."""
    if os.geteuid() != 0:
        return None
    own = _own_groups()
    v1 = {}
    for controller in CONTROLLERS:
        mount = CGROUP_ROOT / controller
        if controller in own and (mount / "cgroup.procs").is_file():
            v1[controller] = mount / own[controller].lstrip("/")
    if len(v1) == len(CONTROLLERS) and all(_writable(f) for f in v1.values()):
        return Hierarchy(1, v1)
    if "" in own and (CGROUP_ROOT / "cgroup.controllers").is_file():
        folder = CGROUP_ROOT / own[""].lstrip("/")
        with contextlib.suppress(OSError):
            offered = (folder / "cgroup.controllers").read_text().split()
            if all(c in offered for c in CONTROLLERS) and _writable(folder):
                return Hierarchy(2, dict.fromkeys(CONTROLLERS, folder))
    return None


def available() -> str | None:
    """None when each worker gets a group of its own; else one sentence saying why not."""
    if os.geteuid() != 0:
        return "per-worker cgroups need root (this grading process is not root)"
    if hierarchy() is None:
        return ("per-worker cgroups need the memory, pids and cpu controllers, writable "
                f"(cgroup v1 or v2 under {CGROUP_ROOT}), and this machine does not offer them")
    if not _kit_folders():
        return f"could not make the kit's control groups under {CGROUP_ROOT}"
    return None


def missing_limits() -> list[str]:
    """The limits a worker goes without where ``available`` says no (empty where it says yes)."""
    return [] if available() is None else list(MISSING)


def _write(path: Path, value: str) -> None:
    path.write_text(value)


@functools.lru_cache(maxsize=1)
def _kit_folders() -> dict[str, Path] | None:
    """``attention-kit/`` in each hierarchy, made once (v2: its controllers enabled)."""
    found = hierarchy()
    if found is None:
        return None
    try:
        folders = {}
        for controller, base in found.folders.items():
            folder = base / NAME
            folder.mkdir(exist_ok=True)
            folders[controller] = folder
        if found.version == 2:
            enable = " ".join(f"+{c}" for c in CONTROLLERS)
            _write(found.folders["cpu"] / "cgroup.subtree_control", enable)
            _write(folders["cpu"] / "cgroup.subtree_control", enable)
        return folders
    except OSError:
        return None


def _student_folders(memory: int) -> dict[str, Path] | None:
    """This grading process's group (one student's): made on first use, its CPU capped, and
    its memory: the student's worker and the answer key's (which answers its questions) run
    side by side, and together get ``memory`` once, with both their start-up headrooms."""
    kit = _kit_folders()
    if kit is None:
        return None
    name = f"g{os.getpid()}"
    folders = {c: f / name for c, f in kit.items()}
    version = hierarchy().version  # type: ignore[union-attr]
    cpu = folders["cpu"]
    made = not cpu.is_dir()
    for folder in set(folders.values()):
        folder.mkdir(exist_ok=True)
    if made:
        _limit_memory(folders["memory"], memory + 2 * MEMORY_HEADROOM, version)
        if version == 1:
            _write(cpu / "cpu.shares", "1024")
            _write(cpu / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            _write(cpu / "cpu.cfs_quota_us", str(CPU_PERIOD_US * STUDENT_CPUS))
        else:
            _write(cpu / "cpu.weight", "100")
            _write(cpu / "cpu.max", f"{CPU_PERIOD_US * STUDENT_CPUS} {CPU_PERIOD_US}")
            _write(cpu / "cgroup.subtree_control", " ".join(f"+{c}" for c in CONTROLLERS))
    return folders


def _limit_memory(folder: Path, limit: int, version: int) -> None:
    """At most ``limit`` bytes of memory for the group's processes, swap included."""
    if version == 1:
        _write(folder / "memory.limit_in_bytes", str(limit))
        swap = folder / "memory.memsw.limit_in_bytes"
        if swap.is_file():
            _write(swap, str(limit))
    else:
        _write(folder / "memory.max", str(limit))
        with contextlib.suppress(OSError):
            _write(folder / "memory.swap.max", "0")


class WorkerGroup:
    """One worker's group: made before the worker starts, removed once it has ended."""

    def __init__(self, folders: dict[str, Path], version: int):
        self.folders, self.version = folders, version

    @property
    def procs(self) -> list[str]:
        """The files the keeper writes itself into (one per hierarchy)."""
        return sorted({str(f / "cgroup.procs") for f in self.folders.values()})

    def oom_kills(self) -> int:
        """How many of its processes the kernel killed for going past the memory limit."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        with contextlib.suppress(OSError, ValueError):
            for line in (self.folders["memory"] / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def remove(self, wait: bool = True) -> None:
        """Remove the group (and its student's group when no other worker is left in it).
        ``wait=False``: a group whose processes have not all gone yet (a keeper exits just
        after it reports) is left for ``settle``, instead of being waited for here."""
        for folder in set(self.folders.values()):
            pause, waited = 0.0005, 0.0  # a process just killed may take a moment: a keeper
            while True:  # is gone a millisecond or two after it reports, and is waited for
                try:  # in steps that start that short (about a second in all, at most)
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if not wait:
                        _unsettled.append(self)
                        return
                    if waited >= 1.0:
                        break
                    time.sleep(pause)
                    waited += pause
                    pause = min(2 * pause, 0.01)
            with contextlib.suppress(OSError):
                folder.parent.rmdir()


# The groups ``remove(wait=False)`` left: removed by ``settle`` (before the next group is made,
# once a submission is graded, and on the way out). By then their keepers have nearly always
# gone, so nothing waits.
_unsettled: list[WorkerGroup] = []


@atexit.register
def settle() -> None:
    """Remove the groups that were left to be removed later, waiting for their processes."""
    while _unsettled:
        _unsettled.pop().remove()


def worker_group(memory: int, processes: int) -> WorkerGroup | None:
    """A new group for one worker allowed ``memory`` bytes and ``processes`` processes, or None
    where groups are not available. OSError where they are and making one failed."""
    found = hierarchy()
    settle()  # first the groups left for later: as if each had been removed when closed
    student = _student_folders(memory) if found is not None else None
    if found is None or student is None:
        return None
    name = f"w{next(_sequence)}"
    folders = {c: f / name for c, f in student.items()}
    for folder in set(folders.values()):
        folder.mkdir()
    _limit_memory(folders["memory"], memory + MEMORY_HEADROOM, found.version)
    _write(folders["pids"] / "pids.max", str(processes + PROCESSES_OF_THE_KIT))
    return WorkerGroup(folders, found.version)


def sweep() -> int:
    """Remove the groups of grading processes that are gone (one killed before it could);
    returns how many were removed."""
    kit = _kit_folders()
    removed = 0
    for base in set((kit or {}).values()):
        for student in base.glob("g*"):
            with contextlib.suppress(ValueError):
                if Path(f"/proc/{int(student.name[1:])}").exists():
                    continue
            for folder in [*student.glob("w*"), student]:
                with contextlib.suppress(OSError):
                    folder.rmdir()
                    removed += 1
    return removed
