"""Control groups: the kernel's own account of what one student's workers use.

Rlimits count per process (``RLIMIT_AS``: each process of a worker may hold the limit) or per
uid; a control group counts every process in it, whatever it maps or forks. Where the grading
process may make groups, it makes, under its own group in each hierarchy::

    attention-kit/g<grading pid>/          one student: CPU share and hard cap (one CPU), and
                                           memory for all their workers together
    attention-kit/g<grading pid>/w<n>/     one worker: memory (shared memory counted), pids

and the worker's keeper joins ``w<n>`` before it forks anything (``zygote.keeper``), so the
worker and every process it starts are inside. The grading process reads the group's count
of out-of-memory kills to say why a worker died, and removes the group when it is done.
Nothing here runs in a worker: the student's code sees the limits only as the kernel
enforcing them.

Who may make them:

- **root**, with the memory, pids and cpu controllers writable (cgroup v1, or v2 where its own
  group may enable them for its children);
- **another user**, in a subtree delegated to them: on cgroup v2 a group this user owns whose
  ``cgroup.procs`` and ``cgroup.subtree_control`` they may write (``systemd-run --user --scope
  -p Delegate=yes ...``; systemd's ``user@.service`` delegates ``pids memory cpu``). Its
  processes are first moved into a leaf of its own (``attention-kit-grader``): a v2 group with
  processes cannot give its children controllers. On cgroup v1, groups this user owns in a
  hierarchy (as Slurm's ``task/cgroup`` made them, chowned to the job's user, before 23.02.5).
  What the subtree offers is used (the memory controller at least); a missing cpu controller
  means no CPU share, a missing pids controller leaves the process count to the rlimit.

Everywhere else a worker is bounded by what an unprivileged process can set (``bounds``), and
``missing_limits`` says what that leaves out.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
NAME = "attention-kit"
LEAF = "attention-kit-grader"  # a delegated v2 group's own processes, moved out of its way
CONTROLLERS = ("memory", "pids", "cpu")
CPU_PERIOD_US = 100_000
STUDENT_CPUS = 1  # a student's workers together get at most one CPU (their --jobs slot)
PROCESSES_OF_THE_KIT = 2  # the keeper and the namespace's init sit in the group beside them
# What a worker's group holds beyond the limit the worker is given: the pages its keeper, init
# and the interpreter write before the student's code runs (copy-on-write of the zygote).
MEMORY_HEADROOM = 512 << 20
NO_MEMORY = ("memory: --memory caps each process of a worker (RLIMIT_AS, shared mappings "
             "counted), not the worker's processes together, and kernel buffers (sockets, "
             "pipes) are bounded per process only by its 256 descriptors")
NO_MEMORY_GPU = ("memory: --memory counts each process's heap only (RLIMIT_DATA: shared memory "
                 "is not counted; RLIMIT_AS would stop the GPU's driver)")
NO_PIDS = ("processes: a worker's 64 are counted by its user namespace or sandbox uid "
           "(RLIMIT_NPROC), not by a cgroup")
NO_CPU = ("CPU: no share per student: a CPU-hungry submission slows the students graded "
          "beside it (each process's CPU time is still capped, and each call's)")

_sequence = itertools.count()
_student_memory: dict[Path, int] = {}  # a student's group -> the memory limit written to it


@dataclass(frozen=True)
class Hierarchy:
    """Where the groups go: cgroup v2's one folder, or v1's one folder per controller (each
    the grading process's own group in that hierarchy), for the controllers it offers."""

    version: int
    folders: dict[str, Path]  # controller -> the grading process's group in its hierarchy
    delegated: bool = False  # not root: a subtree delegated to this user
    controllers: tuple[str, ...] = field(default=CONTROLLERS)


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


def _delegated(folder: Path) -> bool:
    """A v2 group this (non-root) user may manage: theirs, and its processes and controllers
    theirs to move and give out."""
    try:
        owned = folder.stat().st_uid == os.geteuid()
    except OSError:
        return False
    return owned and _writable(folder) and all(
        os.access(folder / name, os.W_OK) for name in ("cgroup.procs", "cgroup.subtree_control"))


@functools.lru_cache(maxsize=1)
def hierarchy() -> Hierarchy | None:
    """The hierarchy this process may make worker groups in, or None (see ``available``)."""
    return find(CGROUP_ROOT, _own_groups(), os.geteuid() == 0)


def find(root: Path, own: dict[str, str], as_root: bool) -> Hierarchy | None:
    """The hierarchy under ``root`` (a cgroup mount point) for a process in the groups ``own``
    (``/proc/self/cgroup``'s): as root, all three controllers; otherwise a delegated subtree
    that offers the memory controller at least (see the module docstring)."""
    v1 = {}
    for controller in CONTROLLERS:
        mount = root / controller
        if controller in own and (mount / "cgroup.procs").is_file():
            folder = mount / own[controller].lstrip("/")
            if _writable(folder):
                v1[controller] = folder
    if len(v1) == len(CONTROLLERS) and as_root:
        return Hierarchy(1, v1)
    if "memory" in v1 and not as_root:
        return Hierarchy(1, v1, delegated=True, controllers=tuple(v1))
    unified = next((m for m in (root, root / "unified") if (m / "cgroup.controllers").is_file()),
                   None)
    if "" not in own or unified is None:
        return None
    folder = unified / own[""].lstrip("/")
    if folder.name == LEAF:  # a delegated group whose processes the kit moved out of its way
        folder = folder.parent
    try:
        offered = (folder / "cgroup.controllers").read_text().split()
    except OSError:
        return None
    if as_root:
        if all(c in offered for c in CONTROLLERS) and _writable(folder):
            return Hierarchy(2, dict.fromkeys(CONTROLLERS, folder))
        return None
    kept = tuple(c for c in CONTROLLERS if c in offered)
    if "memory" in kept and _delegated(folder):
        return Hierarchy(2, dict.fromkeys(kept, folder), delegated=True, controllers=kept)
    return None


def available() -> str | None:
    """None when each worker gets a group of its own; else one sentence saying why not."""
    found = hierarchy()
    if found is None:
        if os.geteuid() == 0:
            return ("per-worker cgroups need the memory, pids and cpu controllers, writable "
                    f"(cgroup v1 or v2 under {CGROUP_ROOT}), and this machine does not offer "
                    "them")
        return ("no cgroup subtree is delegated to this user (cgroup v2: run the kit in "
                "systemd-run --user --scope -p Delegate=yes)")
    if not _kit_folders():
        return f"could not make the kit's control groups under {CGROUP_ROOT}"
    return None


def controllers() -> tuple[str, ...]:
    """The controllers each worker's group gets here: () where no group is made."""
    found = hierarchy()
    return found.controllers if found is not None and available() is None else ()


def enforced() -> str:
    """What bounds a worker here, in a few words: ``cgroups``, ``delegated cgroups``, ``...
    (memory, pids) and rlimits`` or ``rlimits``."""
    found, kept = hierarchy(), controllers()
    if not kept:
        return "rlimits"
    words = "delegated cgroups" if found is not None and found.delegated else "cgroups"
    return words if len(kept) == len(CONTROLLERS) else f"{words} ({', '.join(kept)}) and rlimits"


def missing_limits() -> list[str]:
    """What a worker goes without here, beside what a group of all three controllers gives
    (empty where it has one)."""
    from .bounds import address_space_capped

    kept = controllers()
    missing = []
    if "memory" not in kept:
        missing.append(NO_MEMORY if address_space_capped() else NO_MEMORY_GPU)
    if "pids" not in kept:
        missing.append(NO_PIDS)
    if "cpu" not in kept:
        missing.append(NO_CPU)
    return missing


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _vacate(folder: Path) -> None:
    """Move every process of the delegated v2 group ``folder`` into its leaf ``LEAF``, so the
    group may give its children controllers (cgroup v2 keeps processes in leaves only)."""
    leaf = folder / LEAF
    leaf.mkdir(exist_ok=True)
    for _ in range(10):  # a process may fork while they are moved: again until none is left
        left = (folder / "cgroup.procs").read_text().split()
        if not left:
            return
        for pid in left:
            with contextlib.suppress(OSError):  # gone meanwhile, or not this user's
                _write(leaf / "cgroup.procs", pid)


@functools.lru_cache(maxsize=1)
def _kit_folders() -> dict[str, Path] | None:
    """``attention-kit/`` in each hierarchy, made once (v2: its controllers enabled)."""
    found = hierarchy()
    if found is None:
        return None
    try:
        if found.version == 2 and found.delegated:
            _vacate(next(iter(found.folders.values())))
        folders = {}
        for controller, base in found.folders.items():
            folder = base / NAME
            folder.mkdir(exist_ok=True)
            folders[controller] = folder
        if found.version == 2:
            enable = " ".join(f"+{c}" for c in found.controllers)
            base = next(iter(found.folders.values()))
            _write(base / "cgroup.subtree_control", enable)
            _write(base / NAME / "cgroup.subtree_control", enable)
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
    found = hierarchy()
    assert found is not None
    made = {c for c, folder in folders.items() if not folder.is_dir()}
    for folder in set(folders.values()):
        folder.mkdir(exist_ok=True)
    memory_folder = folders.get("memory")
    if memory_folder is not None and ("memory" in made
                                      or _student_memory.get(memory_folder) != memory):
        _limit_memory(memory_folder, memory + 2 * MEMORY_HEADROOM, found.version)
        _student_memory[memory_folder] = memory
    if "cpu" in made:
        cpu = folders["cpu"]
        if found.version == 1:
            _write(cpu / "cpu.shares", "1024")
            _write(cpu / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            _write(cpu / "cpu.cfs_quota_us", str(CPU_PERIOD_US * STUDENT_CPUS))
        else:
            _write(cpu / "cpu.weight", "100")
            _write(cpu / "cpu.max", f"{CPU_PERIOD_US * STUDENT_CPUS} {CPU_PERIOD_US}")
    if made and found.version == 2:
        _write(next(iter(folders.values())) / "cgroup.subtree_control",
               " ".join(f"+{c}" for c in found.controllers))
    return folders


def _limit_memory(folder: Path, limit: int, version: int) -> None:
    """At most ``limit`` bytes of memory for the group's processes, swap included."""
    if version == 1:
        files = [folder / "memory.limit_in_bytes", folder / "memory.memsw.limit_in_bytes"]
        files = [f for f in files if f.name == "memory.limit_in_bytes" or f.is_file()]
        try:  # memory, then memory and swap: a lower limit; a higher one the other way round
            for path in files:  # (v1 refuses a memory limit above the one with swap)
                _write(path, str(limit))
        except OSError:
            for path in reversed(files):
                _write(path, str(limit))
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

    @property
    def controllers(self) -> list[str]:
        return sorted(self.folders)

    def oom_kills(self) -> int:
        """How many of its processes the kernel killed for going past the memory limit."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        if "memory" not in self.folders:
            return 0
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
    if "memory" in folders:
        _limit_memory(folders["memory"], memory + MEMORY_HEADROOM, found.version)
    if "pids" in folders:
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
