"""The seccomp filter of every worker: the system calls an honest worker makes, and no other.

Installed by the worker last (``confine.restrict``: after its limits, its uid or its dropped
capabilities, its environment and its working folder), before any student code, on every
worker, as root and as a user, whatever else bounds it. Shipped to the zygote as source, so it
imports only the standard library.

**What it allows** (``ALLOWED``): the calls the workers made grading the answer key, every entry
of the bug zoo and files that do what an honest student may beside the exercise (print, warn,
draw fresh random numbers, start torch's threads), as root and as uid 65534, measured with
strace (``MEASURED``; ``tools/trace_syscalls.py`` says how to measure again, and
``tests/test_syscalls.py`` fails when honest work makes a call the filter refuses); the forms
another architecture or C library calls for the same (``EQUIVALENTS``: ``mkdirat`` for
``mkdir``); and the few the C runtime cannot do without (``RUNTIME``: a thread's end).
Of a few calls it reads an argument and allows only what honest work passes (``ARGUMENTS``).
``ioctl`` it allows whole: a GPU's driver speaks through it. The list was measured on x86_64
without a GPU: on a machine with one, the key's checks run on CUDA too, and the test names any
call the driver needs that the list lacks (so does ``make gpu-check``, whose key then loses
points).

**What it refuses**, with EPERM: everything else. An honest library that probes an optional
call then sees an error it reports or falls back from, and the worker lives on: a kill
(``SECCOMP_RET_KILL_PROCESS``) would take the honest functions of the file with it, and cost
the exercise for a probe. With ENOSYS, on which the C library falls back to an older call:
``clone3`` (whose flags, behind a pointer, no filter can read; glibc then calls ``clone``), and
any call past the last this table knows (a newer kernel's). With ENOSYS too, every call of
another architecture's table (x32, i386's ``int 0x80``), which would bypass the numbers here.
"""

from __future__ import annotations

import ctypes
import os
import struct
from dataclasses import dataclass


@dataclass(frozen=True)
class Arch:
    audit: int  # AUDIT_ARCH_*: what seccomp_data.arch holds for this table
    column: int  # its number's place in ``CALLS``
    x32: bool  # x86_64: numbers at X32_BIT and above are the x32 ABI's
    last: int  # the last call this table knows (Linux 6.18): past it, ENOSYS


ARCHES = {
    "x86_64": Arch(audit=0xC000003E, column=0, x32=True, last=469),
    "aarch64": Arch(audit=0xC00000B7, column=1, x32=False, last=469),
}
X32_BIT = 0x40000000

# name: (its number on x86_64, on aarch64; None where that architecture has no such call)
CALLS: dict[str, tuple[int | None, int | None]] = {
    # files, by descriptor and by name (aarch64 has only the *at forms)
    "read": (0, 63), "write": (1, 64), "open": (2, None), "close": (3, 57), "stat": (4, None),
    "fstat": (5, 80), "lstat": (6, None), "lseek": (8, 62), "readlink": (89, None),
    "readlinkat": (267, 78), "getdents64": (217, 61), "mkdir": (83, None),
    "mkdirat": (258, 34), "unlink": (87, None), "unlinkat": (263, 35), "rename": (82, None),
    "renameat": (264, 38), "renameat2": (316, 276), "openat": (257, 56),
    "newfstatat": (262, 79), "getcwd": (79, 17), "fcntl": (72, 25), "ioctl": (16, 29),
    # memory
    "mmap": (9, 222), "mprotect": (10, 226), "munmap": (11, 215), "brk": (12, 214),
    "mremap": (25, 216), "madvise": (28, 233),
    # signals, threads, the process
    "rt_sigaction": (13, 134), "rt_sigprocmask": (14, 135), "rt_sigreturn": (15, 139),
    "clone": (56, 220), "exit": (60, 93), "exit_group": (231, 94), "getpid": (39, 172),
    "getuid": (102, 174), "gettid": (186, 178), "futex": (202, 98), "kill": (62, 129),
    "tgkill": (234, 131), "sched_getaffinity": (204, 123), "set_robust_list": (273, 99),
    "rseq": (334, 293), "restart_syscall": (219, 128), "getrandom": (318, 278),
    "arch_prctl": (158, None), "uname": (63, 160),
    # the worker's socket to the grading process
    "sendto": (44, 206), "recvfrom": (45, 207), "getsockname": (51, 204),
    "getsockopt": (55, 209),
    # refused: named by the kit (``bounds``), its tests and its docs
    "clone3": (435, 435), "io_uring_setup": (425, 425), "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427), "flock": (73, 32), "ptrace": (101, 117),
    "personality": (135, 92), "mincore": (27, 232), "prctl": (157, 167),
    "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "memfd_create": (319, 279), "shmget": (29, 194), "vmsplice": (278, 75),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "userfaultfd": (323, 282), "perf_event_open": (298, 241), "bpf": (321, 280),
    "unshare": (272, 97), "setns": (308, 268), "mount": (165, 40), "pivot_root": (155, 41),
    "capset": (126, 91), "socket": (41, 198), "socketpair": (53, 199), "connect": (42, 203),
    "setsockopt": (54, 208), "pipe2": (293, 59), "inotify_init1": (294, 26),
    "setxattr": (188, 5), "clock_nanosleep": (230, 115), "wait4": (61, 260),
}

# What the filter allows, in the order it compares them (the most frequent first: the replies,
# the imports, memory). What the workers made: ``tools/trace_syscalls.py`` (the module
# docstring); ``readlink``, ``getuid``, ``unlink`` and ``getcwd`` on an error's path, where torch
# imports its compiler (which asks who the user is, and tries /tmp); ``arch_prctl`` where torch's
# kernels ask for AMX's registers; ``clone`` for torch's threads; ``mkdir`` and ``rename`` where
# Python caches a module's bytecode (the key's, in the workers that answer for it); ``uname``
# where ``numpy.testing`` asks the platform's name.
MEASURED = (
    "recvfrom", "sendto", "newfstatat", "read", "openat", "close", "lseek", "futex", "mmap",
    "munmap", "mprotect", "brk", "mremap", "madvise", "write", "ioctl", "getdents64",
    "readlink", "readlinkat", "getcwd", "mkdir", "unlink", "rename", "getsockname",
    "getsockopt", "rt_sigaction", "rt_sigprocmask", "getrandom", "getpid", "getuid", "gettid",
    "sched_getaffinity", "clone", "set_robust_list", "rseq", "arch_prctl", "uname",
    "exit_group",
)
# The forms that another architecture or C library calls for the same: aarch64 has only the
# *at calls, glibc before 2.33 called fstat, stat and lstat where 2.36 calls newfstatat, and a
# newer one may call renameat2 for rename.
EQUIVALENTS = ("fstat", "stat", "lstat", "open", "mkdirat", "unlinkat", "renameat",
               "renameat2")
# What the C runtime cannot do without, though no trace of honest work shows it: a thread's end
# (``exit``: glibc repeats it until it works), a signal handler's return, a call resumed after a
# stop, a signal to itself (``abort``, faulthandler's re-raise of a crash; whom a signal can
# reach, the worker's PID namespace and sandbox uid bound), and a descriptor's flags
# (``fcntl``, as Python's os module sets them).
RUNTIME = ("exit", "rt_sigreturn", "restart_syscall", "kill", "tgkill", "fcntl")
ALLOWED = MEASURED + EQUIVALENTS + RUNTIME
NOSYS = ("clone3",)
# Calls honest work makes that the filter refuses all the same: the library that makes them
# handles the refusal as designed, and the grade is the same. glibc's pthread_create tries
# clone3 first; the C library asks the name service daemon (nscd, whose socket no worker's view
# holds) before it reads /etc/passwd, when torch imports its compiler (on an error's path) and
# asks who the user is; systemd's name service module then counts the kernel's capabilities
# (PR_CAPBSET_READ) where it cannot read their number; Python's selectors module (which
# numpy.testing imports through subprocess) tries epoll and poll, and takes select.
PROBES = {"clone3": "glibc falls back to clone", "socket": "nscd", "prctl": "PR_CAPBSET_READ",
          "epoll_create1": "selectors", "poll": "selectors", "ppoll": "selectors"}

# fcntl: what a descriptor's flags and status need, no lock (F_GETLK, F_SETLK, F_SETLKW,
# F_OFD_*: on a file every worker may read, a lock is a channel between users), no pipe size
# (F_SETPIPE_SZ: 1 MiB a pipe), no lease, no owner for signals.
F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC = 0, 1, 2, 3, 4, 1030
# clone: a thread (what pthread_create passes) or a fork (fork's), and the signal its end sends
# its parent (the low byte); no new namespace (a user namespace, where a tmpfs of any size could
# be mounted), no CLONE_PTRACE, CLONE_UNTRACED, CLONE_PIDFD, CLONE_VFORK or CLONE_PARENT.
# a thread: VM FS FILES SIGHAND THREAD SYSVSEM SETTLS PARENT_SETTID CHILD_CLEARTID;
# a fork: CHILD_SETTID CHILD_CLEARTID
CLONE_THREAD_FLAGS, CLONE_FORK_FLAGS = 0x003D0F00, 0x01200000
CLONE_ALLOWED = CLONE_THREAD_FLAGS | CLONE_FORK_FLAGS | 0xFF
# arch_prctl (x86_64): the permission to use AMX's registers (torch's kernels ask for it), and
# nothing that changes the process's segments, CPUID, vDSO or shadow stack.
ARCH_GET_XCOMP_SUPP, ARCH_GET_XCOMP_PERM, ARCH_REQ_XCOMP_PERM = 0x1021, 0x1022, 0x1023
# name: (the argument read (its low 32 bits: what the kernel reads of each), the values allowed,
# or the bits allowed when given as an int)
ARGUMENTS: dict[str, tuple[int, tuple[int, ...] | int]] = {
    "fcntl": (1, (F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC)),
    "clone": (0, CLONE_ALLOWED),
    "arch_prctl": (0, (ARCH_GET_XCOMP_SUPP, ARCH_GET_XCOMP_PERM, ARCH_REQ_XCOMP_PERM)),
}
ARGUMENT_READ = {name: rule[0] for name, rule in ARGUMENTS.items()}

EPERM, ENOSYS = 1, 38
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def supported() -> bool:
    """Whether this machine's architecture is one the filter knows."""
    return os.uname().machine in ARCHES


def number(name: str, machine: str | None = None) -> int | None:
    """The call's number on ``machine`` (this one's by default), None where it has none."""
    return CALLS[name][ARCHES[machine or os.uname().machine].column]


# -- the program (classic BPF over struct seccomp_data) ------------------------------------------
LD_ABS, JEQ, JGT, JGE, JSET, RET = 0x20, 0x15, 0x25, 0x35, 0x45, 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
NR, ARCH, ARGS = 0, 4, 16  # offsets in seccomp_data; each argument is 8 bytes, low half first

Instruction = tuple[tuple[int, int], str | None, str | None]  # (code, k), its two jumps' labels


def filter_program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter's instructions (code, jump if true, jump if false, k) for ``machine``."""
    arch = ARCHES[machine]
    head: list[Instruction] = [((LD_ABS, ARCH), None, None),
                               ((JEQ, arch.audit), None, "nosys"),
                               ((LD_ABS, NR), None, None)]
    if arch.x32:
        head.append(((JGE, X32_BIT), "nosys", None))
    head.append(((JGT, arch.last), "nosys", None))
    head += [((JEQ, number(name, machine)), "nosys", None) for name in NOSYS]
    blocks: dict[str, list[Instruction]] = {}  # laid after the comparisons, in this order
    for name in ALLOWED:
        nr = number(name, machine)
        if nr is None:
            continue
        rule = ARGUMENTS.get(name)
        head.append(((JEQ, nr), name if rule else "allow", None))
        if rule is None:
            continue
        index, allowed = rule
        block: list[Instruction] = [((LD_ABS, ARGS + 8 * index), None, None)]
        if isinstance(allowed, int):  # the bits allowed: any other set is refused
            block += [((JSET, ~allowed & 0xFFFFFFFF), "deny", "allow")]
        else:
            block += [((JEQ, value), "allow", None) for value in allowed]
            block.append(((RET, RET_ERRNO | EPERM), None, None))
        blocks[name] = block
    head.append(((RET, RET_ERRNO | EPERM), None, None))  # every other call
    blocks.update({"allow": [((RET, RET_ALLOW), None, None)],
                   "deny": [((RET, RET_ERRNO | EPERM), None, None)],
                   "nosys": [((RET, RET_ERRNO | ENOSYS), None, None)]})
    laid, labels = list(head), {}
    for label, block in blocks.items():
        labels[label] = len(laid)
        laid += block

    def jump(label: str | None, index: int) -> int:  # counted from the next instruction
        if label is None:
            return 0
        offset = labels[label] - index - 1
        if not 0 <= offset <= 255:
            raise ValueError(f"the filter's jump to {label} is {offset} instructions long")
        return offset

    return [(code, jump(yes, index), jump(no, index), k)
            for index, ((code, k), yes, no) in enumerate(laid)]


def install() -> None:
    """Set no-new-privileges (the kernel's condition for a filter without CAP_SYS_ADMIN) and
    install the filter on this process and all it starts. Raises OSError where it cannot."""
    machine = os.uname().machine
    if machine not in ARCHES:
        raise OSError(f"no seccomp filter for {machine}")
    instructions = filter_program(machine)
    code = b"".join(struct.pack("<HBBI", *i) for i in instructions)
    buffer = ctypes.create_string_buffer(code, len(code))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    program = Program(len(instructions), ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"seccomp: {os.strerror(error)}")
