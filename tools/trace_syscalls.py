"""Which system calls the workers make once their seccomp filter is on, measured with strace.

The filter's allow-list (``grader/sandbox/seccomp.py``) is written from what this prints, and
``tests/test_syscalls.py`` runs it on the answer key, so that a test fails when honest work
needs a call the list lacks. Run it from the kit's folder, with strace installed (Debian and
Ubuntu: ``apt-get install strace``), as each user the kit grades as: root, and an ordinary
user, from a copy of the kit that user can read (``tests/test_syscalls.py`` is rerun as uid
65534 by ``tests/test_as_user.py``):

    python -m tools.trace_syscalls                     # the key, the plain files and the zoo
    python -m tools.trace_syscalls --corpus key plain  # some of them
    python -m tools.trace_syscalls --keep trace        # and keep strace's own (trace.key, ...)

It grades what ``--corpus`` names, each in a grading process of its own run under
``strace -f``: ``key``, every exercise of the answer key as a student's submission; ``plain``,
files that keep the source rule and do what an honest student may do beside the exercise
(import the NumPy and torch modules the source rule admits, print, warn, draw fresh random
numbers, run torch's autograd and NumPy's linear algebra);
``zoo``, every entry of the bug zoo on its own exercise. Then it reads the traces: every call a
worker made from the moment its filter was installed (``prctl(PR_SET_SECCOMP)``), and every
call of a thread or process it started, each run through the filter's own program (``run``: the
classic BPF the kernel runs). It prints each call (its name, number, how often, and for the
calls whose arguments the filter reads, the values seen) and what the filter answered, and
exits 1 where the filter refused a call that ``seccomp.PROBES`` does not name, or the key, a
plain file or a correct zoo entry lost a point.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

KIT = Path(__file__).resolve().parents[1]
CORPORA = ("key", "plain", "zoo")
STRACE = ("strace", "-f", "-qq", "-n", "-X", "raw", "-e", "raw=!clone,clone3,fork,vfork",
          "--pidns-translation")

# -- the plain files: the key, and what an honest student may do beside it ------------------------
# Appended to the key's file: run when the worker loads it, so in every worker of the exercise.
PLAIN_NUMPY = '''

import warnings

import numpy.random
import numpy.testing  # what NumPy's own tests use: platform, unittest, subprocess's selectors

print("loading", __name__)  # a student's print: captured in the worker's output
warnings.warn("a student's warning")
fresh = np.random.default_rng()  # seeded from the kernel's entropy
square = fresh.standard_normal((256, 256))
print(float(np.linalg.norm(square @ square)), np.linalg.svd(square[:64, :64])[1][0],
      np.linalg.solve(square[:32, :32], square[:32, 0])[0])
'''
PLAIN_TORCH = '''

import warnings

import torch.nn.init
import torch.special
import torch.testing

print("loading", __name__)
warnings.warn("a student's warning")
square = torch.randn(256, 256, requires_grad=True)
(square @ square).sum().backward()
print(float(square.grad.norm()), torch.linalg.svdvals(square.detach()[:64, :64])[0])
'''
PLAIN = {"softmax": PLAIN_NUMPY, "mha": PLAIN_TORCH}


@dataclass(frozen=True)
class Graded:
    what: str  # "key", "plain" or "zoo:<entry>"
    exercise: str
    score: float
    max_score: float
    must_pass: bool  # the key, a plain file or a correct zoo entry: full marks or a fault


def _submissions(corpus: list[str], folder: Path) -> list[tuple[str, Path, list[str], bool]]:
    """(what, its folder, the exercises to grade, whether it must score full marks)."""
    sys.path.insert(0, str(KIT / "tests"))
    from zoo import catalog

    from grader.core.course import load

    course = load(KIT / "course.toml")
    found = []
    if "key" in corpus:
        found.append(("key", catalog.KEY, list(course.names()), True))
    if "plain" in corpus:
        plain = folder / "plain"
        shutil.copytree(catalog.KEY, plain)
        for name, extra in PLAIN.items():
            with open(plain / f"{name}.py", "a") as handle:
                handle.write(extra)
        found.append(("plain", plain, list(PLAIN), True))
    if "zoo" in corpus:
        for entry in catalog.ENTRIES:
            found.append((f"zoo:{entry.name}", catalog.build(entry, folder / "zoo"),
                          [entry.exercise], entry.kind == "correct"))
    return found


def grade(corpus: list[str]) -> list[Graded]:
    """Grade the corpus in this process (which runs under strace)."""
    from grader.core.course import load
    from grader.core.engine import grade_submission

    course = load(KIT / "course.toml")
    graded = []
    with tempfile.TemporaryDirectory(prefix="trace-syscalls-") as tmp:
        os.chmod(tmp, 0o755)
        for what, folder, exercises, must_pass in _submissions(corpus, Path(tmp)):
            result = grade_submission(folder, course=course, exercises=exercises)
            for name in exercises:
                one = result.results[name]
                graded.append(Graded(what, name, one.score, one.max_score, must_pass))
    return graded


# -- reading strace's output ---------------------------------------------------------------------
LINE = re.compile(r"^(\d+) +\[ *(\d+)\] (.*)$")
CALL = re.compile(r"^(\w+)\((.*)$")
RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*)$")
RESULT = re.compile(r"^(.*)\) += (.*)$")
CHILD = re.compile(r"^(-?\d+|0x[0-9a-f]+)(?: /\* (\d+) in strace's PID NS \*/)?")
CLONES = ("clone", "clone3", "fork", "vfork")
PR_SET_SECCOMP, SECCOMP_SET_MODE_FILTER = 0x16, 1


@dataclass
class Call:
    life: int  # which process or thread (a pid may be used again once its holder ended)
    index: int  # its place in the trace (the line where it began)
    name: str
    nr: int
    args: tuple[int, ...]
    result: str


@dataclass
class Trace:
    calls: list[Call] = field(default_factory=list)
    installed: dict[int, int] = field(default_factory=dict)  # life: index of its filter
    born: list[tuple[int, int, int]] = field(default_factory=list)  # (parent, index, pid)
    lives: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # pid: (life, first)


def _number(text: str) -> int:
    text = text.strip()
    try:
        return int(text, 0) & (1 << 64) - 1
    except ValueError:
        return 0  # a pointer strace printed as NULL, a string: no argument the filter reads


def _arguments(name: str, text: str) -> tuple[int, ...]:
    """The call's six arguments as the filter reads them (strace's raw form, but the clones',
    which are decoded so that the child's pid is given in strace's own namespace)."""
    if name == "clone":
        flags = re.search(r"flags=([^,]+)", text)
        value = sum(_number(part) for part in flags.group(1).split("|")) if flags else 0
        return (value, 0, 0, 0, 0, 0)
    if name in CLONES:
        return (0,) * 6
    parts = [_number(part) for part in text.split(", ")] if text.strip() else []
    return tuple((parts + [0] * 6)[:6])


def read_trace(path: Path) -> Trace:
    trace = Trace()
    life_of: dict[int, int] = {}
    pending: dict[int, tuple[str, int, str, int]] = {}
    lives = 0
    with open(path, errors="replace") as handle:
        for index, line in enumerate(handle):
            match = LINE.match(line.rstrip("\n"))
            if match is None:
                continue
            pid, nr, rest = int(match[1]), int(match[2]), match[3]
            if pid not in life_of:
                lives += 1
                life_of[pid] = lives
                trace.lives.setdefault(pid, []).append((lives, index))
            life = life_of[pid]
            if rest.startswith("+++"):  # it ended: the next use of the pid is another's
                del life_of[pid]
                continue
            if rest.startswith("---"):  # a signal
                continue
            resumed = RESUMED.match(rest)
            if resumed is not None:
                if pid not in pending:
                    continue
                name, nr, before, began = pending.pop(pid)
                rest = before + resumed[2]
            else:
                call = CALL.match(rest)
                if call is None:
                    continue
                name, rest, began = call[1], call[2], index
            if rest.endswith(" <unfinished ...>"):
                pending[pid] = (name, nr, rest[: -len(" <unfinished ...>")], began)
                continue
            done = RESULT.match(rest)
            if done is None:  # ended inside the call (exit, a kill): "= ?"
                text, result = rest.rsplit(")", 1)[0] if ")" in rest else rest, "?"
            else:
                text, result = done[1], done[2]
            args = _arguments(name, text)
            trace.calls.append(Call(life, began, name, nr, args, result))
            if result.startswith("0") or result.split(" ")[0].isdigit():
                if name == "prctl" and args[0] == PR_SET_SECCOMP or (
                        name == "seccomp" and args[0] == SECCOMP_SET_MODE_FILTER):
                    trace.installed.setdefault(life, began)
                if name in CLONES:
                    child = CHILD.match(result)
                    if child is not None:
                        host = int(child[2] or _number(child[1]))
                        trace.born.append((life, began, host))
    return trace


def filtered_calls(trace: Trace) -> list[Call]:
    """The calls made under the filter: after the process installed it, or by any process or
    thread started (however deep) by one that had."""
    since = dict(trace.installed)
    for parent, began, pid in sorted(trace.born, key=lambda born: born[1]):
        if parent in since and since[parent] < began:
            # the child is the first process of that pid seen after the clone began (its
            # lines may come before the clone's return in the parent)
            child = [life for life, first in trace.lives.get(pid, []) if first > began]
            if child:
                since[child[0]] = -1
    return [call for call in trace.calls if call.life in since and call.index > since[call.life]]


# -- the filter's program, run as the kernel runs it -----------------------------------------------
LD_W_ABS, JA, JEQ, JGT, JGE, JSET, RET, ALU_AND = 0x20, 0x05, 0x15, 0x25, 0x35, 0x45, 0x06, 0x54


def run(program: list[tuple[int, int, int, int]], nr: int, args: tuple[int, ...],
        audit: int) -> int:
    """What ``program`` (a seccomp filter: classic BPF) returns for the call ``nr`` with
    ``args`` made in the architecture ``audit``."""
    data = struct.pack("<iIQ6Q", nr, audit, 0, *(list(args) + [0] * 6)[:6])
    accumulator, pc = 0, 0
    while True:
        code, yes, no, k = program[pc]
        pc += 1
        if code == LD_W_ABS:
            accumulator = struct.unpack_from("<I", data, k)[0]
        elif code == ALU_AND:
            accumulator &= k
        elif code == JA:
            pc += k
        elif code in (JEQ, JGT, JGE, JSET):
            taken = {JEQ: accumulator == k, JGT: accumulator > k, JGE: accumulator >= k,
                     JSET: bool(accumulator & k)}[code]
            pc += yes if taken else no
        elif code == RET:
            return k
        else:
            raise ValueError(f"instruction {code:#x} is not one this interpreter knows")


# -- what it prints --------------------------------------------------------------------------------
def describe(action: int) -> str:
    from grader.sandbox import seccomp

    if action == seccomp.RET_ALLOW:
        return "allowed"
    if action & 0xFFFF0000 == seccomp.RET_ERRNO:
        return f"refused ({os.strerror(action & 0xFFFF)})"
    return f"action {action:#x}"


def summary(calls: list[Call]) -> tuple[list[str], int]:
    """One line per call made (its name, number, count, the argument values the filter reads,
    its answer), and how many of the calls made the filter refused."""
    from grader.sandbox import seccomp

    machine = os.uname().machine
    program = seccomp.filter_program(machine)
    audit = seccomp.ARCHES[machine].audit
    seen: dict[tuple[str, int, str], int] = collections.Counter()
    values: dict[tuple[str, int], set[int]] = collections.defaultdict(set)
    refused = 0
    for call in calls:
        verdict = describe(run(program, call.nr, call.args, audit))
        if verdict != "allowed" and call.name in seccomp.PROBES:
            verdict += f", a probe ({seccomp.PROBES[call.name]})"
        else:
            refused += verdict != "allowed"
        seen[call.name, call.nr, verdict] += 1
        read = seccomp.ARGUMENT_READ.get(call.name)
        if read is not None:
            values[call.name, call.nr].add(call.args[read])
    lines = []
    for (name, nr, verdict), count in sorted(seen.items(), key=lambda item: item[0][1]):
        shown = ", ".join(f"{v:#x}" for v in sorted(values.get((name, nr), ())))
        lines.append(f"{nr:>4} {name:<22} {count:>8}  {verdict}"
                     + (f"  [{shown}]" if shown else ""))
    return lines, refused


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.trace_syscalls",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", nargs="+", choices=CORPORA, default=list(CORPORA))
    parser.add_argument("--keep", type=Path,
                        help="keep strace's output in this file (.key, .plain, .zoo)")
    parser.add_argument("--grade", action="store_true", help=argparse.SUPPRESS)  # under strace
    args = parser.parse_args(argv)
    if args.grade:
        print(json.dumps([vars(g) for g in grade(args.corpus)]))
        return 0
    if shutil.which("strace") is None:
        print("trace_syscalls: strace is not installed", file=sys.stderr)
        return 2
    graded: list[Graded] = []
    calls: list[Call] = []
    workers = lives = 0
    with tempfile.TemporaryDirectory(prefix="trace-syscalls-") as tmp:
        # Each corpus in a grading process of its own: one that grades the key first replays
        # its examples for every file after it, and one that does not draws them (two paths)
        for corpus in args.corpus:
            output = Path(f"{args.keep}.{corpus}") if args.keep else Path(tmp) / corpus
            done = subprocess.run([*STRACE, "-o", str(output), sys.executable, "-m",
                                   "tools.trace_syscalls", "--grade", "--corpus", corpus],
                                  cwd=KIT, capture_output=True, text=True)
            if done.returncode != 0:
                print(done.stdout[-3000:] + done.stderr[-3000:], file=sys.stderr)
                return 2
            graded += [Graded(**g) for g in json.loads(done.stdout.splitlines()[-1])]
            trace = read_trace(output)
            made = filtered_calls(trace)
            calls += made
            workers += len(trace.installed)
            lives += len({call.life for call in made})
    lines, refused = summary(calls)
    lost = [g for g in graded if g.must_pass and g.score < g.max_score]
    print(f"{len(calls)} calls of {workers} filtered workers, {lives} processes and threads, "
          f"grading {len(graded)} exercises ({', '.join(args.corpus)}) as uid {os.geteuid()} "
          f"on {os.uname().machine}:")
    print("\n".join(lines))
    for g in lost:
        print(f"lost points: {g.what} {g.exercise} {g.score} / {g.max_score}")
    print(f"refused: {refused} calls" if refused else "refused: none")
    return 1 if refused or lost else 0


if __name__ == "__main__":
    sys.exit(main())
