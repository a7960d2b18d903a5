"""``make bench``'s costs beside the class (``python -m tools.bench`` runs them; split from
``tools.bench``, which holds the key's ratios and the class at scale):

``fork_cost``: a torch worker's start and stop, in CPU, from a zygote in 2 MiB pages (a
batch's) and from one in 4 KiB pages (one `grade`'s): what ``zygote.huge_pages`` saves each of
a class's workers.

``neighbours``: how much longer an honest student's grading takes beside a student whose code
keeps every core busy (past the source rule), with the workers' cgroups and without. Target:
under 1.5x with cgroups.

``parse_cost``: what reading a submission costs the grading process itself (its own CPU,
``RUSAGE_SELF``, and its own peak memory, ``ru_maxrss``), grading the key's six core files and
the same with each of the worst helper files a student can add beside them (reverse-ordered
assignments, deep nesting, a literal as large as the copy takes): every file is parsed and
judged by the reader, under each exercise's limits, so the worst costs the grading process
what the honest one does. Target: under 1.2x, CPU and memory.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grader.core.course import KIT_ROOT as ROOT
from tools.bench_profile import _cpu, core_submission

# A student past the source rule (as if they had found a way): their softmax keeps sixteen
# processes busy until the grader stops its worker, each in a session of its own (the kernel's
# autogroups would otherwise count them as one).
CPU_HOG = """
import os
for _ in range(16):
    if os.fork() == 0:
        os.setsid()
        while True:
            pass
while True:
    pass
"""


def neighbours(jobs: int = 2) -> dict[str, float]:
    """Seconds until an honest student's row arrives, graded alone and graded beside a student
    whose code keeps every core busy (``--jobs`` 2), with each worker in its own cgroup (the
    student's CPU capped at one) and without; the ratios are the slowdowns. No limit per call
    (``Limits.call``): the hog keeps the cores busy for its exercise's whole time."""
    from grader.core import engine
    from grader.integrations.routes import batch
    from grader.sandbox import cgroups
    from grader.sandbox.isolation import Limits

    def until_honest(root: Path) -> float:
        """Seconds from the empty folder's row (the batch's start-up done) to the honest one's;
        the hog, sorted first, is graded from the start."""
        start, arrived = time.monotonic(), {}
        batch.run(root, jobs=jobs, limits=Limits(timeout=30, call=0), progress=None,
                  on_record=lambda done: arrived.setdefault(done.student, time.monotonic() - start))
        return arrived["honest"] - arrived["a-empty"]

    verdict, group = engine._verdict, cgroups.worker_group
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="attention-kit-bench-") as tmp:
        alone, beside = Path(tmp) / "alone", Path(tmp) / "beside"
        for root in (alone, beside):
            core_submission(root / "honest")
            (root / "a-empty").mkdir()
        (beside / "b-hog").mkdir()
        (beside / "b-hog" / "softmax.py").write_text(CPU_HOG)
        engine._verdict = lambda *args, **kwargs: None  # the hog's `import os` runs
        try:
            figures["alone"] = until_honest(alone)
            figures["beside"] = until_honest(beside)
            if cgroups.available() is None:
                cgroups.worker_group = lambda *args, **kwargs: None
                figures["beside_without_cgroups"] = until_honest(beside)
        finally:
            engine._verdict, cgroups.worker_group = verdict, group
    print(f"an honest student graded alone:          {figures['alone']:6.1f} s")
    print(f"beside a CPU-hungry one (--jobs {jobs}):      {figures['beside']:6.1f} s, "
          f"{figures['beside'] / figures['alone']:.2f}x (target < 1.5x with cgroups; "
          f"{cgroups.available() or 'each worker in its own cgroup'})")
    if "beside_without_cgroups" in figures:
        print(f"the same without cgroups:                {figures['beside_without_cgroups']:6.1f}"
              f" s, {figures['beside_without_cgroups'] / figures['alone']:.2f}x")
    return figures


def _reverse_chain(lines: int) -> str:
    """Assignments each to the name the next line binds (``x0 = x1``, ``x1 = x2``, ...), in a
    function never called: one pass over the file per line for a fixpoint that looks at every
    line in each pass (4e1a685: 90 s a scan at 4,000 lines)."""
    return ("import numpy as np\n\n\ndef unused():\n"
            + "".join(f"    x{i} = x{i + 1}\n" for i in range(lines))
            + f"    x{lines} = np.linalg\n")


def worst_helpers(room: int) -> dict[str, tuple[str, str]]:
    """The worst helper files for the reader, each as a label and its text; ``room``: the bytes
    the copy takes beside the key's six core files (``MAX_SUBMISSION_BYTES``)."""
    literal = "DATA = [" + "1," * ((room - 64) // 2) + "]\n"  # 4e1a685: 9 GB for 18 MiB
    return {
        "chain": ("15,000 reverse-ordered assignments", _reverse_chain(15_000)),
        "nesting": ("lists 90 deep, 1,500 lines", ("x = " + "[" * 90 + "]" * 90 + "\n") * 1500),
        "literal": (f"one list literal of {len(literal) / (1 << 20):.1f} MiB", literal),
    }


def parse_child() -> None:
    """The measured process of ``parse_cost``: grade ``sys.argv[1]`` with ``--jobs 1`` (every
    exercise in this process), as ``grader grade`` starts, and print its own CPU seconds, peak
    memory, score and the reader's CPU seconds (with its children) as JSON."""
    from grader.sandbox import isolation

    isolation.start_zygote()  # as `grader grade` does: both zygotes, and the reader
    from grader.core import engine
    from grader.sandbox import readers
    from tools.bench_profile import _cpu_of

    result = engine.grade_submission(sys.argv[1], jobs=1)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    reader = readers._SERVER[0].process.pid if readers._SERVER else None
    print(json.dumps({"cpu": usage.ru_utime + usage.ru_stime, "maxrss": usage.ru_maxrss * 1024,
                      "score": result.score, "reader": _cpu_of(reader, children=True)}))
    sys.stdout.flush()


def parse_cost(repeats: int = 3) -> dict[str, float]:
    """The grading process's own CPU and peak memory grading the key's six core files, alone
    and beside each of ``worst_helpers`` (a fresh process each, ``--jobs 1``, in turns,
    ``repeats`` times; medians); the worst of the ratios is the figure. Target: under 1.2x."""
    from grader.core.submission import MAX_SUBMISSION_BYTES

    rows: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="attention-kit-bench-") as tmp:
        honest = core_submission(Path(tmp) / "honest")
        room = MAX_SUBMISSION_BYTES - sum(p.stat().st_size for p in honest.iterdir())
        folders = {"honest": ("the key's six core files", honest)}
        for name, (label, text) in worst_helpers(room).items():
            folder = core_submission(Path(tmp) / name)
            (folder / "helper.py").write_text(text)
            folders[name] = (f"+ {label} ({len(text) >> 10:,} KiB)", folder)
        command = [sys.executable, "-c", "from tools.bench_costs import parse_child; "
                   "parse_child(); from grader.integrations.routes.cli import leave; leave(0)"]
        for _ in range(repeats):
            for name, (_, folder) in folders.items():
                done = subprocess.run([*command, str(folder)], cwd=ROOT, capture_output=True,
                                      text=True, check=True)
                rows.setdefault(name, []).append(json.loads(done.stdout.splitlines()[-1]))
    figures: dict[str, float] = {}
    print("the grading process's own cost, reading a submission (RUSAGE_SELF: its CPU and "
          f"peak memory, not its workers' or the reader's; --jobs 1, median of {repeats}):")
    for name, (label, _) in folders.items():
        cpu = statistics.median(r["cpu"] for r in rows[name])
        peak = statistics.median(r["maxrss"] for r in rows[name])
        reader = statistics.median(r["reader"] for r in rows[name])
        figures |= {f"{name}_cpu": cpu, f"{name}_peak": peak, f"{name}_reader": reader}
        ratios = "" if name == "honest" else (
            f" ({cpu / figures['honest_cpu']:.2f}x, {peak / figures['honest_peak']:.2f}x)")
        print(f"  {label:<48} {cpu:5.2f} s CPU, {peak / (1 << 20):5.0f} MiB{ratios}; "
              f"score {rows[name][0]['score']:g}; the reader {reader:.1f} s CPU")
    worst = max(max(figures[f"{n}_cpu"] / figures["honest_cpu"],
                    figures[f"{n}_peak"] / figures["honest_peak"]) for n in folders)
    figures["worst"] = worst
    print(f"  the worst against the honest: {worst:.2f}x (target < 1.2x)")
    return figures


def fork_cost(workers: int = 30, rounds: int = 3) -> dict[str, float]:
    """Milliseconds of machine CPU (``_cpu``) for a torch worker's start, hello and stop, from
    a zygote in 2 MiB pages (what a batch starts, ``zygote.huge_pages``) and from one in 4 KiB
    pages (what one `grade` starts), ``workers`` at a time, alternated for ``rounds``."""
    from grader.sandbox import zygote_client
    from grader.sandbox.isolation import Sandbox

    spent = {"huge": 0.0, "plain": 0.0}
    saved = zygote_client._ZYGOTES.get("torch")
    with tempfile.TemporaryDirectory(prefix="attention-kit-bench-") as tmp:
        os.chmod(tmp, 0o755)  # as a grading run's copy: the workers' user may read it
        folder = core_submission(Path(tmp) / "one")
        try:
            for _ in range(rounds):
                for kind in spent:
                    zygote = zygote_client.Zygote("torch", kind == "huge")
                    zygote_client._ZYGOTES["torch"] = zygote
                    zygote.wait_ready()
                    before = _cpu()
                    for _ in range(workers):
                        with Sandbox(folder, "mha", framework="torch") as sandbox:
                            sandbox.request("hello")
                    spent[kind] += _cpu() - before
                    zygote.close()
        finally:
            zygote_client._ZYGOTES.pop("torch", None)
            if saved is not None:
                zygote_client._ZYGOTES["torch"] = saved
    figures = {kind: 1000 * total / (workers * rounds) for kind, total in spent.items()}
    print(f"a torch worker's start and stop: {figures['huge']:5.1f} ms of CPU from a batch's "
          f"zygote (2 MiB pages), {figures['plain']:5.1f} ms from one `grade`'s")
    return figures
