"""Whether each worker can be given cgroups of its own (memory, processes, CPU) here.

A minimal check, standing in until the per-worker cgroups themselves land: ``available()``
says whether this process could make a child cgroup per worker with the memory, pids and cpu
controllers, on either layout the kernel offers:

- cgroup v1: as root, writable ``memory`` and ``pids`` hierarchies under /sys/fs/cgroup;
- cgroup v2: the cgroup this process is in (``/proc/self/cgroup``, line ``0::PATH``) holds
  the ``memory``, ``pids`` and ``cpu`` controllers and is writable by this user (root, or a
  subtree delegated to the user, as systemd does for ``user@UID.service`` and Slurm may do
  for a job).

It reads the machine and changes nothing. Standard library only.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
NEEDED_V1 = ("memory", "pids")
NEEDED_V2 = ("memory", "pids", "cpu")


def available() -> str | None:
    """None when per-worker cgroups can be made here; otherwise one sentence saying what is
    missing."""
    if os.geteuid() == 0 and all(_writable_v1(name) for name in NEEDED_V1):
        return None
    found = _own_v2_cgroup()
    if found is None:
        return ("no per-worker cgroups: " + ("no writable cgroup v1 memory and pids "
                                            "hierarchies under /sys/fs/cgroup and no cgroup v2"
                                            if os.geteuid() == 0 else
                                            "not root, and this process is in no cgroup v2"))
    folder, controllers = found
    lacking = [c for c in NEEDED_V2 if c not in controllers]
    if lacking:
        return (f"no per-worker cgroups: the cgroup v2 {folder} lacks the "
                f"{', '.join(lacking)} controller(s)")
    if not (os.access(folder, os.W_OK) and os.access(folder / "cgroup.subtree_control",
                                                      os.W_OK)):
        return (f"no per-worker cgroups: the cgroup v2 {folder} is not delegated to this "
                f"user (uid {os.geteuid()} cannot write it)")
    return None


def _writable_v1(controller: str) -> bool:
    folder = ROOT / controller
    return (folder / "tasks").is_file() and os.access(folder, os.W_OK)


def _own_v2_cgroup() -> tuple[Path, list[str]] | None:
    """The folder of this process's cgroup v2 and the controllers it holds, if any."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    path = next((line[3:] for line in lines if line.startswith("0::")), None)
    if path is None:
        return None
    for mount in (ROOT, ROOT / "unified"):  # unified alone, or beside v1 (hybrid)
        if (mount / "cgroup.controllers").is_file():
            folder = mount / path.lstrip("/")
            try:
                return folder, (folder / "cgroup.controllers").read_text().split()
            except OSError:
                return None
    return None
