"""What bounds a worker that no control group holds, and what takes its user's privileges away.

Runs in the worker (``confine.restrict``), after its namespaces and view are built and before any
student code; shipped to the zygote as source, so it imports only the standard library and
``seccomp``.

Where the worker has no memory group of its own (not root and no delegated cgroup, or root on
a machine without writable controllers), an unprivileged process can still set:

- ``RLIMIT_AS``: the worker's address space, shared mappings (``mmap(MAP_SHARED)``, a mapped
  ``/dev/shm`` file, SysV segments while attached) counted, which ``RLIMIT_DATA`` leaves out. It
  is per process: each process the worker starts may hold as much (the processes are capped);
- ``RLIMIT_NOFILE``: what kernel buffers one process can hold up;
- its score for the kernel's out-of-memory killer raised to the most: should the machine run
  short, a worker goes before the grading process. The worker's init sets it, before it
  mounts the worker's /proc read-only (``mounts.private_view``): a process may lower its own
  score again, down to its parent's, without ``CAP_SYS_RESOURCE``, and the kernel then picks
  the largest process, which a batch's grading process can be.

What no rlimit counts, the seccomp filter every worker runs under (``seccomp``, whatever bounds
it) allows no way to: ``memfd_create``, SysV ``shmget`` (a segment keeps its pages once
detached), pipes and ``vmsplice`` (a pipe then holds pages of the process's memory by
reference, each with its whole 2 MiB huge page once the process unmaps it: 60 pipes held 1.7 GiB
of a worker whose ``--memory`` was 0.25 GiB and whose ``VmRSS`` read 23 MiB), sockets,
``setsockopt`` and io_uring (``SO_SNDBUF`` raises a buffer to what the machine allows: a hundred
socket pairs held 794 MiB of a worker whose ``--memory`` was 0.25 GiB where
``net.core.wmem_max`` was 4 MiB, and io_uring set it where the filter refused ``setsockopt``),
and a user namespace of its own (where it could mount a tmpfs of any size).

Every worker, whatever bounds it, leaves the session keyring it inherited (the grading
process's: a login's, holding whatever its user keeps there, Kerberos tickets say) for an empty
one of its own (``own_session_keyring``), and the filter refuses the keyring calls
(``keyctl``, ``add_key``, ``request_key``): a worker that runs as the grading user could
otherwise link that user's keyrings into its own, read every key in them, and leave keys there
for the next worker to read.

A worker in a user namespace of its own (grading as another user than root) starts with every
capability in that namespace: its init needed them to build the view. ``drop_capabilities``
clears them before the student's code runs, or the code could remount its read-only view
writable (the instructor's virtual environment is theirs to write), lift the seal on its own
``/proc/PID/clear_refs`` or mount a tmpfs of any size.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import resource
import struct

from . import seccomp

NOFILE = 256  # descriptors one worker process may hold where no cgroup counts kernel memory

KEYCTL_JOIN_SESSION_KEYRING = 1
ENOSYS = 38
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
CAPABILITY_VERSION_3 = 0x20080522
# Devices that need their whole address space (a CUDA context reserves terabytes of it): where
# the machine has them, RLIMIT_AS would stop every GPU exercise, so it is left unset.
ADDRESS_HUNGRY = ("/dev/nvidia[0-9]*", "/dev/kfd")


def address_space_capped() -> bool:
    """Whether ``RLIMIT_AS`` can be set here (no device that needs the address space)."""
    return not any(glob.glob(pattern) for pattern in ADDRESS_HUNGRY)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _status(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    return 0


def cap_memory(memory: int) -> None:
    """At most ``memory`` bytes of address space beyond what the process maps now, shared
    mappings counted; at most ``NOFILE`` descriptors."""
    if address_space_capped():
        cap = _status("VmSize") + memory
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = NOFILE if hard == resource.RLIM_INFINITY else min(NOFILE, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(limit, soft), limit))


def first_for_the_oom_killer() -> None:
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as handle:
        handle.write("1000")


def own_session_keyring() -> None:
    """Leave the inherited session keyring for a new, empty one of this process's own (no key
    of the grading user's is then possessed, so none is readable). Where the kernel has no
    keyrings there is nothing to leave."""
    if not seccomp.supported():
        return
    libc = _libc()
    if libc.syscall(seccomp.number("keyctl"), KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        error = ctypes.get_errno()
        if error != ENOSYS:
            raise OSError(error, f"keyctl(JOIN_SESSION_KEYRING): {os.strerror(error)}")


def drop_capabilities() -> None:
    """Clear every capability (effective, permitted, inheritable, ambient) and set
    no-new-privileges, so no program it runs gains any back. Raises OSError where it cannot."""
    if not seccomp.supported():
        raise OSError(f"cannot drop capabilities on {os.uname().machine}")
    libc = _libc()
    header = ctypes.create_string_buffer(struct.pack("<Ii", CAPABILITY_VERSION_3, 0))
    data = ctypes.create_string_buffer(24)  # two {effective, permitted, inheritable}: zero
    if libc.syscall(seccomp.number("capset"), header, data) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"capset: {os.strerror(error)}")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    with open("/proc/self/status") as status:
        effective = next(line for line in status if line.startswith("CapEff:"))
    if int(effective.split()[1], 16):
        raise OSError("capabilities are still held after capset")
