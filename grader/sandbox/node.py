"""Which isolation this machine gives the workers, checked before a class is graded on it.

A cluster's task runs as the user who submitted it, not as root, on a node the kit has never
seen. The workers' isolation (``confine``) rests on two things the node may or may not give:

- **namespaces**: as root the worker's own PID, mount, IPC and network namespaces and a uid
  of its own; otherwise the same namespaces inside a user namespace, where the kernel allows
  one. Without them a worker sees the machine's files: the answer key, the other students'
  folders.
- **cgroups** (``cgroups.available()``): as root, the per-worker uid caps a worker's processes;
  as another user only a cgroup of its own can, so without one a fork bomb or a memory hog
  slows every other worker on the node, and their grades with it.

``check()`` probes both the way a worker is set up (in a throwaway child, so this process is
unchanged) and says whether untrusted code may be graded here, what is missing, and the words
each row's status adds (none under the full isolation: root and namespaces).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field

from . import cgroups, confine


@dataclass(frozen=True)
class NodeIsolation:
    namespaces: str  # "root", "user" (inside a user namespace) or "" (none)
    cgroups: str | None  # None: per-worker cgroups work; else what is missing
    missing: list[str] = field(default_factory=list)  # why untrusted code may not run here

    @property
    def isolated(self) -> bool:
        """Untrusted submissions may be graded here."""
        return not self.missing

    def label(self, trusted: bool = False) -> str:
        """What a row's status adds: nothing under the full isolation (root, namespaces),
        else the isolation the workers had (``user namespaces and cgroups``), and
        ``; --trust-submissions`` where the check was overruled. No comma: a CSV cell as is."""
        if self.namespaces == "root":
            return ""
        label = (("user namespaces" if self.namespaces else "no namespaces") + " and "
                 + ("no cgroups" if self.cgroups else "cgroups"))
        return label + "; --trust-submissions" if self.missing and trusted else label


def check() -> NodeIsolation:
    """Probe this machine (see the module docstring)."""
    mode = namespaces()
    missing_cgroups = cgroups.available()
    missing = []
    if not mode:
        missing.append("no namespaces for the workers (not root, and the kernel refuses this "
                       "user a user namespace with mount rights: see "
                       "/proc/sys/user/max_user_namespaces), so a submission could read the "
                       "answer key and the other students' folders")
    if mode != "root" and missing_cgroups:
        missing.append(f"{missing_cgroups}, and without root nothing else caps one worker's "
                       "processes and memory, so one submission could slow the others into "
                       "their time limits")
    return NodeIsolation(mode, missing_cgroups, missing)


def namespaces() -> str:
    """The namespaces a worker gets here: ``confine.enter_namespaces`` in a forked child, then,
    as the worker's init does first, a private mount tree with a fresh /tmp. "root", "user"
    or "" when either step is refused."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the probe: never returns
        code = 1
        try:
            os.close(read)
            mode = confine.enter_namespaces(False)
            if mode and not _mounts_in_new_pid_namespace():
                mode = ""
            os.write(write, mode.encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as handle:
        answer = handle.read().decode(errors="replace")
    os.waitpid(pid, 0)
    return answer if answer in ("root", "user") else ""


def _mounts_in_new_pid_namespace() -> bool:
    child = os.fork()  # the first process of the new PID namespace, as the worker's init is
    if child == 0:
        code = 1
        with contextlib.suppress(BaseException):
            confine._mount(None, "/", None, confine.MS_REC | confine.MS_PRIVATE)
            confine._mount("tmpfs", "/tmp", "tmpfs", confine.MS_NOSUID | confine.MS_NODEV,
                           "mode=700,size=1m")
            code = 0
        os._exit(code)
    _, status = os.waitpid(child, 0)
    return status == 0
