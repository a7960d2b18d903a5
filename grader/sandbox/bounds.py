"""What bounds a worker that no control group holds, and what takes its user's privileges away.

Runs in the worker (``confine.restrict``), after its namespaces and view are built and before any
student code; shipped to the zygote as source, so it imports only the standard library.

Where the worker has no memory group of its own (not root and no delegated cgroup, or root on
a machine without writable controllers), an unprivileged process can still set:

- ``RLIMIT_AS``: the worker's address space, shared mappings (``mmap(MAP_SHARED)``, a mapped
  ``/dev/shm`` file, SysV segments while attached) counted, which ``RLIMIT_DATA`` leaves out. It
  is per process: each process the worker starts may hold as much (the processes are capped);
- ``RLIMIT_NOFILE``: what kernel buffers (sockets, pipes) one process can hold up, each
  socket at its default size: the filter refuses ``SO_SNDBUF`` and ``SO_RCVBUF``, which
  raise it to what the machine allows (a hundred socket pairs held 794 MiB of a worker whose
  ``--memory`` was 0.25 GiB where ``net.core.wmem_max`` was 4 MiB);
- a seccomp filter that refuses the ways to memory no mapping counts: ``memfd_create``, SysV
  ``shmget`` (a segment keeps its pages once detached), ``vmsplice`` (a pipe then holds pages
  of the process's memory by reference, each with its whole 2 MiB huge page once the process
  unmaps it: 60 pipes held 1.7 GiB of a worker whose ``--memory`` was 0.25 GiB and whose
  ``VmRSS`` read 23 MiB), and a user namespace of its own (where it could mount a tmpfs of any
  size), so ``clone3`` (whose flags a filter cannot read) is answered ENOSYS and the C
  library falls back to ``clone``; and every system call of another architecture's table
  (x32, i386's ``int 0x80``);
- its score for the kernel's out-of-memory killer raised to the most: should the machine run
  short, a worker goes before the grading process. The worker's init sets it, before it
  mounts the worker's /proc read-only (``mounts.private_view``): a process may lower its own
  score again, down to its parent's, without ``CAP_SYS_RESOURCE``, and the kernel then picks
  the largest process, which a batch's grading process can be.

Every worker, whatever bounds it, leaves the session keyring it inherited (the grading
process's: a login's, holding whatever its user keeps there, Kerberos tickets say) for an empty
one of its own (``own_session_keyring``), and where the filter is installed (in every user
namespace, whatever bounds it) the keyring calls (``keyctl``, ``add_key``, ``request_key``) are
refused: a worker that runs as the grading user could otherwise link that user's keyrings into
its own, read every key in them, and leave keys there for the next worker to read.

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

NOFILE = 256  # descriptors one worker process may hold where no cgroup counts kernel memory

# Per architecture: the seccomp audit value and the numbers of the calls the filter refuses.
# Where the machine's is not listed, a worker in a user namespace cannot drop its capabilities
# and the node reports no namespaces (``node.namespaces``).
ARCHES = {
    "x86_64": {"audit": 0xC000003E, "memfd_create": 319, "shmget": 29, "clone": 56,
               "clone3": 435, "unshare": 272, "capset": 126, "vmsplice": 278, "setsockopt": 54,
               "add_key": 248, "request_key": 249, "keyctl": 250, "x32": True},
    "aarch64": {"audit": 0xC00000B7, "memfd_create": 279, "shmget": 194, "clone": 220,
                "clone3": 435, "unshare": 97, "capset": 91, "vmsplice": 75, "setsockopt": 208,
                "add_key": 217, "request_key": 218, "keyctl": 219, "x32": False},
}
KEYRING_CALLS = ("add_key", "request_key", "keyctl")
SOL_SOCKET, SO_SNDBUF, SO_RCVBUF = 1, 7, 8  # the same on x86_64 and aarch64
KEYCTL_JOIN_SESSION_KEYRING = 1
CLONE_NEWUSER = 0x10000000
EPERM, ENOSYS = 1, 38
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
CAPABILITY_VERSION_3 = 0x20080522
# Devices that need their whole address space (a CUDA context reserves terabytes of it): where
# the machine has them, RLIMIT_AS would stop every GPU exercise, so it is left unset.
ADDRESS_HUNGRY = ("/dev/nvidia[0-9]*", "/dev/kfd")


def supported() -> bool:
    """Whether this machine's architecture is one ``deny_syscalls`` and
    ``drop_capabilities`` know."""
    return os.uname().machine in ARCHES


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
    arch = ARCHES.get(os.uname().machine)
    if arch is None:
        return
    libc = _libc()
    if libc.syscall(arch["keyctl"], KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        error = ctypes.get_errno()
        if error != ENOSYS:
            raise OSError(error, f"keyctl(JOIN_SESSION_KEYRING): {os.strerror(error)}")


def drop_capabilities() -> None:
    """Clear every capability (effective, permitted, inheritable, ambient) and set
    no-new-privileges, so no program it runs gains any back. Raises OSError where it cannot."""
    arch = ARCHES.get(os.uname().machine)
    if arch is None:
        raise OSError(f"cannot drop capabilities on {os.uname().machine}")
    libc = _libc()
    header = ctypes.create_string_buffer(struct.pack("<Ii", CAPABILITY_VERSION_3, 0))
    data = ctypes.create_string_buffer(24)  # two {effective, permitted, inheritable}: zero
    if libc.syscall(arch["capset"], header, data) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"capset: {os.strerror(error)}")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    with open("/proc/self/status") as status:
        effective = next(line for line in status if line.startswith("CapEff:"))
    if int(effective.split()[1], 16):
        raise OSError("capabilities are still held after capset")


# -- the seccomp filter ---------------------------------------------------------------------
LD_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000


def filter_program(machine: str, memory: bool = True) -> list[tuple[int, int, int, int]]:
    """The filter's instructions (code, jump if true, jump if false, k) for ``machine``:
    the keyring calls refused; with ``memory`` (no memory group counts the worker) the
    calls to memory that no rlimit counts too (see the module docstring)."""
    arch = ARCHES[machine]
    deny, nosys = RET_ERRNO | EPERM, RET_ERRNO | ENOSYS
    # Laid out as a list of (instruction, label of its true jump, of its false jump).
    program: list[tuple[tuple[int, int], str | None, str | None]] = [
        ((LD_ABS, 4), None, None),  # seccomp_data.arch
        ((JEQ, arch["audit"]), "native", "nosys"),
    ]
    body: list[tuple[tuple[int, int], str | None, str | None]] = [
        ((LD_ABS, 0), None, None),  # seccomp_data.nr
    ]
    if arch["x32"]:
        body.append(((JGE, 0x40000000), "nosys", None))
    body += [((JEQ, arch[name]), "deny", None) for name in KEYRING_CALLS]
    if memory:
        body += [
            ((JEQ, arch["memfd_create"]), "deny", None),
            ((JEQ, arch["shmget"]), "deny", None),
            ((JEQ, arch["vmsplice"]), "deny", None),
            ((JEQ, arch["setsockopt"]), "sockopt", None),
            ((JEQ, arch["clone3"]), "nosys", None),
            ((JEQ, arch["unshare"]), "flags", None),
            ((JEQ, arch["clone"]), "flags", None),
        ]
    body.append(((RET, RET_ALLOW), None, None))
    tail = {
        "flags": [((LD_ABS, 16), None, None),  # the low half of seccomp_data.args[0]
                  ((JSET, CLONE_NEWUSER), "deny", None), ((RET, RET_ALLOW), None, None)],
        # setsockopt(fd, SOL_SOCKET, SO_SNDBUF or SO_RCVBUF, ...): refused, anything else not
        "sockopt": [((LD_ABS, 24), None, None),  # the low half of args[1], the level
                    ((JEQ, SOL_SOCKET), None, "allow"),
                    ((LD_ABS, 32), None, None),  # the low half of args[2], the option
                    ((JEQ, SO_SNDBUF), "deny", None), ((JEQ, SO_RCVBUF), "deny", None),
                    ((RET, RET_ALLOW), None, None)],
        "allow": [((RET, RET_ALLOW), None, None)],
        "deny": [((RET, deny), None, None)],
        "nosys": [((RET, nosys), None, None)],
    }
    laid = [*program, *body]
    labels = {"native": len(program)}
    for name, block in tail.items():
        labels[name] = len(laid)
        laid += block

    def jump(label: str | None, index: int) -> int:  # counted from the next instruction
        return 0 if label is None else labels[label] - index - 1

    return [(code, jump(yes, index), jump(no, index), k)
            for index, ((code, k), yes, no) in enumerate(laid)]


def deny_syscalls(memory: bool = True) -> None:
    """Install the filter (see the module docstring; ``memory``: its memory calls too) on this
    process and all it starts. Raises OSError where it cannot."""
    machine = os.uname().machine
    if machine not in ARCHES:
        raise OSError(f"no seccomp filter for {machine}")
    instructions = filter_program(machine, memory)
    code = b"".join(struct.pack("<HBBI", *i) for i in instructions)
    buffer = ctypes.create_string_buffer(code, len(code))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    program = Program(len(instructions), ctypes.addressof(buffer))
    libc = _libc()
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"seccomp: {os.strerror(error)}")
