"""Which isolation this machine gives the workers, checked before a class is graded on it.

A cluster's task runs as the user who submitted it, not as root, on a node the kit has never
seen; so does a JupyterHub instructor's server, and a laptop. The workers' isolation
(``confine``) rests on two things the node may or may not give:

- **namespaces**: as root the worker's own PID, mount, IPC and network namespaces and a uid
  of its own; otherwise the same namespaces inside a user namespace, where the kernel allows
  one (the worker then runs as the user grading, with no capability left). Without them a
  worker sees the machine's files: the answer key, the other students' folders. They are all
  ``--trust-submissions`` is for.
- **bounds** on one worker's memory, processes and CPU: a control group of its own where the
  grading process may make one (``cgroups``: root, or a subtree delegated to this user), else
  what an unprivileged process can set (``bounds``: ``RLIMIT_AS`` with shared mappings
  counted, per process; the process count of the worker's own user namespace or sandbox uid;
  size caps on its private /tmp and /dev/shm; no CPU share).

``check()`` probes both the way a worker is set up (in a throwaway child, so this process is
unchanged) and says whether untrusted code may be graded here, and the words each row's status
adds (none under the full isolation: root, namespaces and the three controllers).

It also counts the other users whose processes run here (``neighbours``): no namespace hides a
worker from them. A process of another user sees what ``/proc`` shows of every process (a
worker's command line, its times) unless ``/proc`` is mounted with ``hidepid``, and shares the
page cache and the CPUs with the workers. The isolation line an instructor's route prints
names them ("processes of 2 other users run here (ana, bob)"); a row's status does not, as the
records hold nothing that varies from one run to the next.
"""

from __future__ import annotations

import contextlib
import os
import pwd
from dataclasses import dataclass, field

from . import cgroups, confine, mounts, seccomp
from .confine import SANDBOX_UID_BASE, SANDBOX_UIDS

NAMESPACES = {"root": "namespaces", "user": "user namespaces", "": "no namespaces"}


@dataclass(frozen=True)
class NodeIsolation:
    namespaces: str  # "root", "user" (inside a user namespace) or "" (none)
    enforced: str = "cgroups"  # what bounds a worker (``cgroups.enforced``)
    controllers: tuple[str, ...] = cgroups.CONTROLLERS  # those of its control group
    missing: list[str] = field(default_factory=list)  # why untrusted code may not run here
    # The other users whose processes this process saw at start, by name (None: not counted),
    # and whether /proc hides other users' processes here (hidepid).
    others: tuple[str, ...] | None = None
    hidepid: bool = False

    @property
    def isolated(self) -> bool:
        """Untrusted submissions may be graded here."""
        return not self.missing

    def label(self, trusted: bool = False) -> str:
        """What a row's status adds: nothing under the full isolation (root, namespaces, a
        group of all three controllers), else what the workers had (``user namespaces,
        rlimits; no CPU share``), and ``; --trust-submissions`` where the check was
        overruled."""
        full = len(self.controllers) == len(cgroups.CONTROLLERS)
        if self.namespaces == "root" and full and self.enforced == "cgroups":
            return ""
        label = f"{NAMESPACES[self.namespaces]}, {self.enforced}"
        if "cpu" not in self.controllers:
            label += "; no CPU share"
        return label + "; --trust-submissions" if self.missing and trusted else label

    def line(self, trusted: bool = False) -> str:
        """The isolation line's words: ``label``, then who else runs here; nothing under the
        full isolation where no other user's process runs."""
        label = self.label(trusted)
        said = self.neighbours()
        if said is None or (not label and not self.others):
            return label
        return f"{label or NAMESPACES[self.namespaces] + ', ' + self.enforced}; {said}"

    def neighbours(self) -> str | None:
        """Who else runs here, in words (None: not counted)."""
        if self.others is None:
            return None
        shown = ", ".join(self.others[:SHOWN]) + (
            f" and {len(self.others) - SHOWN} more" if len(self.others) > SHOWN else "")
        if self.others:
            users = "user" if len(self.others) == 1 else "users"
            return f"processes of {len(self.others)} other {users} run here ({shown})"
        if self.hidepid:
            return "/proc hides other users' processes here (hidepid)"
        return "no other user's process runs here"


SHOWN = 5  # the other users named in the line; the rest are counted


def check() -> NodeIsolation:
    """Probe this machine (see the module docstring)."""
    mode = namespaces()
    missing = []
    if not mode:
        missing.append("no namespaces for the workers (not root, and the kernel refuses this "
                       "user a user namespace with mount rights: see "
                       "/proc/sys/user/max_user_namespaces), so a submission could read the "
                       "answer key and the other students' folders")
    return NodeIsolation(mode, cgroups.enforced(), cgroups.controllers(), missing,
                         neighbours(), hidepid())


def neighbours(proc: str = "/proc") -> tuple[str, ...]:
    """The users, other than this process's, whose processes ``proc`` shows, by name (a uid
    where there is none), sorted: root's aside (the system's, which sees everything anyway)
    and the kit's sandbox uids (workers, of this run or another)."""
    ours = {0, os.getuid(), os.geteuid()}
    uids = set()
    with contextlib.suppress(OSError):
        for entry in os.scandir(proc):
            if entry.name.isdigit():
                uid = _real_uid(entry.path)
                if uid is not None and uid not in ours and not _sandbox(uid):
                    uids.add(uid)
    return tuple(sorted(_name(uid) for uid in uids))


def _real_uid(folder: str) -> int | None:
    """A process's real uid (its status), or the owner of its folder where the status is
    closed to us (``hidepid=1``); None once it has gone."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open(os.path.join(folder, "status")) as status:
            for text in status:
                if text.startswith("Uid:"):
                    return int(text.split()[1])
    with contextlib.suppress(OSError):
        return os.stat(folder).st_uid
    return None


def _sandbox(uid: int) -> bool:
    """A sandbox uid of the kit's (``confine.claim_sandbox_user``: no account has it)."""
    if not SANDBOX_UID_BASE <= uid < SANDBOX_UID_BASE + SANDBOX_UIDS:
        return False
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return True
    return False


def _name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def hidepid(mountinfo: str = "/proc/self/mountinfo") -> bool:
    """Whether the /proc this process sees hides other users' processes (``hidepid=1`` or
    more, ``noaccess``, ``invisible``, ``ptraceable``)."""
    with contextlib.suppress(OSError):
        with open(mountinfo) as mounts_here:
            for text in mounts_here:
                fields = text.split()
                if len(fields) > 4 and fields[4] == "/proc" and " - proc " in text:
                    options = text.rsplit(" ", 1)[-1].strip().split(",")
                    return any(o.startswith("hidepid=") and o != "hidepid=0"
                               and o != "hidepid=off" for o in options)
    return False


def namespaces() -> str:
    """The namespaces a worker gets here: ``confine.enter_namespaces`` in a forked child, then,
    as the worker's init does first, a private mount tree with a fresh /tmp and /proc. "root",
    "user" or "" when either step is refused, or where the workers' seccomp filter cannot be
    installed (``seccomp``: an architecture it does not know, whose capabilities a worker in a
    user namespace could not drop either, or a kernel or container that refuses filters)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the probe: never returns
        code = 1
        try:
            os.close(read)
            mode = confine.enter_namespaces(False)
            if mode and not _mounts_in_new_pid_namespace():
                mode = ""
            if mode:  # the worker's filter, as it installs it (last: it allows no mount)
                try:
                    seccomp.install()
                except OSError:
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
            mounts._mount(None, "/", None, mounts.MS_REC | mounts.MS_PRIVATE)
            mounts._mount("tmpfs", "/tmp", "tmpfs", mounts.MS_NOSUID | mounts.MS_NODEV,
                          "mode=700,size=1m")
            # A fresh /proc of the new PID namespace, as a worker's view holds: a container
            # whose /proc has paths masked refuses it to a user namespace.
            os.mkdir("/tmp/proc")
            mounts._mount("proc", "/tmp/proc", "proc",
                          mounts.MS_NOSUID | mounts.MS_NODEV | mounts.MS_NOEXEC)
            code = 0
        os._exit(code)
    _, status = os.waitpid(child, 0)
    return status == 0
