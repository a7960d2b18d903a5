"""Where grading time goes: ``make bench``'s breakdown (``python -m tools.bench
--breakdown-only``).

A folder is graded in a fresh process (``child``), as ``python -m grader grade`` grades it
(the examples its last run recorded replayed), but one exercise after another, with timers
wrapped around the engine's parts in that process alone: nothing graded changes, and the score
is printed beside the table. Each part's time is its own, the time of the parts
it calls taken out (a round trip made while diagnosing is the student's, not the diagnosis's),
so the rows add up to the wall time the parent measured. A part whose name the engine no
longer has is skipped with a note; its time falls in "the rest".
"""

from __future__ import annotations

import functools
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader.core.course import KIT_ROOT as ROOT
from grader.core.course import load

MARK = "attention-kit-breakdown: "
# The table's rows, in order: (key, label). "interpreter" and "rest" are measured by difference.
PARTS = [
    ("interpreter", "python start-up and exit (measured outside)"),
    ("import", "start-up: import grader.core.engine"),
    ("load", "start-up: course.load() and its exercises"),
    ("zygote", "waiting for the zygotes (Zygote.wait_ready)"),
    ("workers", "starting/stopping workers (Sandbox)"),
    ("view", "reading its files, the worker's view (build_view)"),
    ("student", "the student's time: round trips (request)"),
    ("drawing", "drawing examples (Hypothesis)"),
    ("arithmetic", "the checks' own arithmetic"),
    ("key", "the answer key (AnswerKey calls)"),
    ("diagnosis", "misconceptions (diagnose, note_misconceptions)"),
    ("vacuous", "the vacuous rule (verdicts)"),
    ("rest", "the rest"),
]
TOP = 5


class _Clock:
    """Exclusive times: each wrapped call's seconds, less those of the wrapped calls inside it."""

    def __init__(self) -> None:
        self.parts: Counter[str] = Counter()
        self.pairs: Counter[str] = Counter()  # "exercise op" -> the round trips' seconds
        self.calls: Counter[str] = Counter()
        self.notes: list[str] = []
        self._inner: list[float] = []  # per open call: seconds spent in wrapped calls inside

    def timed(self, func: Callable, part: Callable[..., str] | str,
              pair: Callable[..., str] | None = None) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self._inner.append(0.0)
            start = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                spent = time.perf_counter() - start
                own = spent - self._inner.pop()
                if self._inner:
                    self._inner[-1] += spent
                self.parts[part(*args, **kwargs) if callable(part) else part] += own
                if pair is not None:
                    key = pair(*args, **kwargs)
                    self.pairs[key] += own
                    self.calls[key] += 1
        return wrapper

    def wrap(self, owner: Any, name: str, part: Callable[..., str] | str,
             pair: Callable[..., str] | None = None) -> None:
        func = getattr(owner, name, None)
        if func is None:
            self.notes.append(f"{getattr(owner, '__name__', '?')}.{name} not found: "
                              "its time is in the rest")
            return
        setattr(owner, name, self.timed(func, part, pair))


def seconds(command: list[str], repeats: int = 3, cwd: Path = ROOT) -> float:
    return interleaved({"one": (command, cwd)}, repeats)["one"]


def interleaved(commands: dict[str, tuple[list[str], Path]], repeats: int = 3) -> dict[str, float]:
    """The median wall seconds of each named command (run in its folder), run in turns: one
    of each, then again, ``repeats`` times. A ratio of two of them then compares runs made
    seconds apart, not minutes: this machine's speed drifts (``import torch`` took 1.5 s and
    2.5 s within one hour), and a baseline measured apart from its subject misstates the ratio
    either way."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeats):
        for name, (command, cwd) in commands.items():
            start = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=cwd)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def core_submission(folder: Path) -> Path:
    """The answer key's six core files: the 100-point assignment, without the optional bonus."""
    folder.mkdir(parents=True)
    for name in load().names("core"):
        shutil.copyfile(ROOT / "solutions" / f"{name}.py", folder / f"{name}.py")
    return folder


def _cpu() -> float:
    """CPU seconds the machine has spent so far (all its processes, /proc/stat).

    The children's rusage misses every worker killed in its namespace (its init dies without
    reaping it): about a quarter of a class's CPU time. The machine's count misses nothing,
    and on a quiet machine holds nothing else; elsewhere it is the children's rusage."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        return sum(int(f) for f in fields[1:4] + fields[6:8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime


def _request_pair(sandbox: Any, op: str, **kwargs: Any) -> str:
    func = kwargs.get("func") if op == "call" else None
    return f"{getattr(sandbox, 'exercise', '?')} {op}" + (f" {func}" if func else "")


def _cpu_of(pid: int | None, children: bool = False) -> float:
    """CPU seconds of one process itself, its threads included (``/proc/PID/stat``), and with
    ``children`` those of the children it has waited for; 0 when it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = sum(int(f) for f in fields[11:15 if children else 13])
        return ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _count_workers(sandbox_class: Any, clock: _Clock) -> None:
    """Add each worker's own CPU seconds to ``cpu_workers`` just before it is stopped (a
    worker's children, and a worker that died on its own, are not counted)."""
    kill = getattr(sandbox_class, "kill", None)
    if kill is None or not hasattr(sandbox_class, "worker_pid"):
        clock.notes.append("Sandbox.kill or worker_pid not found: the workers' CPU not read")
        return

    @functools.wraps(kill)
    def counted(self: Any) -> None:
        if not getattr(self, "closed", False):
            clock.parts["cpu_workers"] += _cpu_of(self.worker_pid())
        kill(self)

    sandbox_class.kill = counted


def child(argv: list[str] | None = None) -> None:
    """The measured process: grade ``argv[0]`` (its exercises ``argv[1:]``, or all) as
    ``grader grade`` does, and print the parts' seconds as JSON after ``MARK``."""
    args = sys.argv[1:] if argv is None else argv
    clock, start = _Clock(), time.perf_counter()
    from grader.problems import frameworks
    from grader.sandbox import isolation

    # As `grader grade` does: their imports overlap ours, and one NumPy exercise needs no torch.
    isolation.start_zygote(frameworks(args[1:]) if args[1:] else None)
    from grader.core import engine

    clock.parts["import"] = time.perf_counter() - start
    from grader.core.course import load

    loaded = time.perf_counter()
    course = load()
    exercises = course.exercises()  # the problems' modules, imported here
    from grader.core import replay_store

    replay_store.load_cache()  # as `grader grade` does: the examples its last run drew
    gc.freeze()
    clock.parts["load"] = time.perf_counter() - loaded
    clock.wrap(isolation.Zygote, "wait_ready", "zygote")
    for name in ("__init__", "__exit__", "close"):
        clock.wrap(isolation.Sandbox, name, "workers")
    clock.wrap(isolation.Sandbox, "request", "student", _request_pair)
    _count_workers(isolation.Sandbox, clock)
    clock.wrap(engine, "build_view", "view")
    clock.wrap(engine, "diagnose", "diagnosis")
    clock.wrap(engine, "note_misconceptions", "diagnosis")
    clock.wrap(engine, "verdicts", "vacuous")
    # A property check's run, less its inner test, is Hypothesis drawing examples; a plain
    # check's run is its own arithmetic.
    exercise = sys.modules.get("grader.core.exercise")  # engine's imports, looked up
    key = sys.modules.get("grader.core.answer_key")  # (not imported: a rename is a note)
    clock.wrap(getattr(exercise, "Check", None), "run", lambda check, *a, **k: (
        "drawing" if getattr(check, "is_property", True) else "arithmetic"))
    inner = 0
    for ex in exercises:
        for check in getattr(ex, "checks", []):
            hypothesis = getattr(getattr(check, "func", None), "hypothesis", None)
            if hypothesis is not None and hasattr(hypothesis, "inner_test"):
                hypothesis.inner_test = clock.timed(hypothesis.inner_test, "arithmetic")
                inner += 1
    if not inner:
        clock.notes.append("no Hypothesis inner test found: drawing includes the arithmetic")
    answer_key = getattr(key, "AnswerKey", None)
    if answer_key is not None and hasattr(answer_key, "__getattr__"):
        found = answer_key.__getattr__

        def key_function(self: Any, name: str) -> Any:
            return clock.timed(found(self, name), "key")

        answer_key.__getattr__ = key_function
    else:
        clock.notes.append("answer_key.AnswerKey not found: its time is in the arithmetic")
    graded = time.perf_counter()
    result = engine.grade_submission(args[0], course=course, exercises=args[1:] or None)
    end = time.perf_counter()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    for framework, zygote in getattr(isolation, "_ZYGOTES", {}).items():
        pid = getattr(getattr(zygote, "process", None), "pid", None)
        clock.parts[f"cpu_zygote_{framework}"] = _cpu_of(pid)
    for server in getattr(sys.modules.get("grader.sandbox.readers"), "_SERVER", []):
        clock.parts["cpu_reader"] = _cpu_of(server.process.pid, children=True)
    figures: dict[str, Any] = {
        "child": end - start, "grade": end - graded, **clock.parts,
        "cpu_self": usage.ru_utime + usage.ru_stime,
        "score": result.score, "max_score": result.max_score,
        "bonus_score": result.bonus_score, "bonus_max_score": result.bonus_max_score,
        "pairs": {k: [v, clock.calls[k]] for k, v in clock.pairs.most_common(TOP)},
        "notes": clock.notes,
    }
    print(MARK + json.dumps(figures), flush=True)


@functools.cache
def torch_import() -> float:
    """Seconds for ``python -c "import torch"``, median of 3: measured once per run."""

    return seconds([sys.executable, "-c", "import torch"])


def breakdown(folder: Path, exercises: list[str] | None = None) -> dict[str, float]:
    """Grade ``folder`` (``exercises`` of it, or all) in a fresh process with the engine's
    parts timed; return the seconds of each part (``PARTS``' keys), ``total``, the CPU
    seconds of the grading process (``cpu_self``) and of the machine (``cpu_machine``), the
    score, and ``request EXERCISE OP``: the top round trips' seconds."""

    command = [sys.executable, "-c",
               "from tools.bench_profile import child; child(); "
               "from grader.integrations.routes.cli import leave; leave(0)",  # as `grade` ends
               str(folder), *(exercises or [])]
    cpu0, start = _cpu(), time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    total, cpu = time.perf_counter() - start, _cpu() - cpu0
    lines = [line for line in done.stdout.splitlines() if line.startswith(MARK)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the breakdown's grading process failed ({done.returncode}):\n"
                           f"{done.stderr[-2000:]}")
    child_figures = json.loads(lines[-1][len(MARK):])
    figures = _combine(child_figures, total, cpu)
    _print(figures, child_figures["notes"], torch_import())
    return figures


def _combine(child_figures: dict[str, Any], total: float, cpu: float) -> dict[str, float]:
    """The child's figures with the parent's wall ``total`` and machine ``cpu`` seconds, and
    the two parts measured by difference: the interpreter's start and exit, and the rest."""
    figures: dict[str, float] = {"total": total, "cpu_machine": cpu,
                                 "interpreter": total - child_figures["child"]}
    for key, value in child_figures.items():
        if isinstance(value, int | float):
            figures[key] = float(value)
    figures["rest"] = child_figures["child"] - sum(
        figures.get(key, 0.0) for key, _ in PARTS if key not in ("interpreter", "rest"))
    for key, (spent, calls) in child_figures["pairs"].items():
        figures[f"request {key}"] = spent
        figures[f"calls {key}"] = float(calls)
    return figures


def _print(figures: dict[str, float], notes: list[str], baseline: float) -> None:
    total = figures["total"]
    print(f"score {figures['score']:g}/{figures['max_score']:g}, bonus "
          f"{figures['bonus_score']:g}/{figures['bonus_max_score']:g} (graded as usual)")
    print(f"{'part':<50} {'s':>6} {'share':>6} {'x torch':>7}")
    for key, label in [*PARTS, ("total", "total (wall)")]:
        spent = figures.get(key, 0.0)
        print(f"{label:<50} {spent:6.2f} {100 * spent / total:5.1f}% {spent / baseline:6.2f}x")
    others = figures["cpu_machine"] - figures["cpu_self"]
    zygotes = ", ".join(f"{k[len('cpu_zygote_'):]} {v:.2f}" for k, v in figures.items()
                        if k.startswith("cpu_zygote_"))
    print(f"CPU s: the grading process {figures['cpu_self']:.2f}, its workers "
          f"{figures.get('cpu_workers', 0):.2f}, its zygotes ({zygotes or 'not read'}; each "
          f"process's own, /proc), its reader {figures.get('cpu_reader', 0):.2f} (parsing and "
          f"the source rule, with the children it forked); the machine "
          f"{figures['cpu_machine']:.2f}, of which {others:.2f} not the grading process "
          "(anything else running included)")
    print(f"import torch: {baseline:.2f} s (median of 3, this run)")
    print(f"  {'round trips, top 5 (exercise op [func])':<48} {'s':>6} {'calls':>6}")
    for key in [k for k in figures if k.startswith("request ")]:
        print(f"  {key[len('request '):]:<48} {figures[key]:6.2f} "
              f"{figures['calls ' + key[len('request '):]]:6.0f}")
    for note in notes:
        print(f"  note: {note}")


def breakdowns() -> None:
    """The three tables: the whole answer key, its six core exercises, softmax alone."""
    from grader.core.plural import counted

    # A student's second `make grade`: the first run recorded the examples (build/replay/).
    subprocess.run([sys.executable, "-m", "grader", "grade", str(ROOT / "solutions")],
                   cwd=ROOT, stdout=subprocess.DEVNULL, check=True)
    load1 = os.getloadavg()[0]
    print(f"where grading time goes (a fresh process each, the exercises one after another "
          f"so that the parts add up, where `grade` grades them side by side; the examples a "
          f"first run recorded, replayed; load average {load1:.1f} on "
          f"{counted(os.cpu_count() or 1, 'core')} "
          f"before)")
    with tempfile.TemporaryDirectory(prefix="attention-kit-bench-") as tmp:
        core = core_submission(Path(tmp) / "key")
        for title, folder, exercises in [
            ("the answer key (solutions/, every exercise)", ROOT / "solutions", None),
            ("the six core exercises (core_submission)", core, None),
            ("--exercise softmax", core, ["softmax"]),
        ]:
            print(f"\n{title}:")
            breakdown(folder, exercises)
