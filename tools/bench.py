"""``make bench``: grading time as ratios to ``python -c "import torch"`` timed in the same run.

Targets (issue 48, "a class costs its arithmetic"), each a ratio to the baseline of the same run:

- a second ``grader grade`` of the answer key (its examples and the course's plan kept from the
  first) under 1.3x, its six core exercises under 1.2x; one exercise (``grade --exercise
  softmax``, a student's run after an edit) is reported beside them;
- an honest submission's CPU in a class (``honest_cost``: a batch of correct ones) under 0.1x
  the CPU of one fresh ``grader grade`` of the key;
- a class of 200 of the bench's mix (``class_scale``: correct, wrong and hostile files, a hang
  among them, ``batch --jobs 2``) under 60x, 40x the moonshot.

Each figure is printed beside the kit's before its workers were made to hold no answer
(``BEFORE``), and ``--against DIR`` measures another checkout's key ratios and class in the same
run. Both are measured as fresh processes, so machine load affects them alike.

Then, with nbgrader installed, ``notebook_class``: the class below as notebooks, autograded by
``python -m grader nbgrader autograde --jobs 2`` (seconds and CPU seconds per notebook, and
the projection for 200 on 2 cores; target under 200 s), against plain ``nbgrader
autograde`` on the same first few notebooks in the same run.

``class_scale`` also reports submissions per minute, the peak memory of the whole process tree
(PSS, so pages shared after fork count once), the class report built from the batch's
``--json-dir`` (``python -m grader report``) as a share of the batch's wall time (target: under
5%), and what ``--report`` adds to compare every pair of the class's files
(``similarity.compare``, each file made distinct first) as a share of it (target: under 10%).

Before the class, three costs (``tools.bench_costs``, split from this module, says what each
measures and its target): ``parse_cost``, the grading process's own cost beside the worst
helper files a student can add; ``neighbours``, an honest student's grading beside a student
whose code keeps every core busy; and ``fork_cost``, a torch worker's start and stop from a
batch's zygote and from one `grade`'s.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from grader.core.course import KIT_ROOT as ROOT
from grader.core.course import load
from grader.core.plural import counted
from tools.bench_costs import fork_cost, neighbours, parse_cost
from tools.bench_profile import (  # noqa: F401  (breakdown: bench's)
    _cpu,
    breakdown,
    breakdowns,
    core_submission,
    interleaved,
    seconds,
    torch_import,
)

# The same figures for the kit before its workers were made to hold no answer, no torch (NumPy
# exercises) and no way to torch's attention (commit 1740e78, measured by `make bench` on the
# 2-core machines this kit is developed on): what each figure below is set against.
BEFORE = {"core": 2.6, "whole": 3.6, "class_wall": 276.0, "class_cpu": 2.35,
          "notebooks_wall": 292.0}



# A class of 20, repeated: 13 correct, 4 wrong, 3 hostile (the hostile kinds rotate).
WRONG = {
    "softmax.py": ("shifted = converted - np.max(converted, axis=axis, keepdims=True)",
                   "shifted = converted"),
    "attention.py": (" / np.sqrt(d_k)", ""),
    "heads.py": (".transpose(0, 2, 1, 3)  # (B, H, T, D)", "  # (B, H, T, D)"),
}
HOSTILE = [
    ("softmax_backward.py", "import os\nos._exit(3)\n"),
    ("attention.py", "import ctypes\nctypes.string_at(0)\n"),
    ("softmax.py", "print('softmax 15 / 15 all checks pass; total 100 / 100')\n"),
    ("mha.py", "import numpy as np\nhoard = []\nwhile True:\n    hoard.append(np.ones(8 << 20))\n"),
    ("kv_cache.py", f"open({str(ROOT / 'solutions' / 'kv_cache.py')!r}).read()\n"),
    ("heads.py", "import sys\nsys.exit(0)\n"),
    ("softmax.py", "import numpy as np\nnp.allclose = lambda *a, **k: True\n"),
]
HANG = ("heads.py", "while True:\n    pass\n")  # costs the full time limit: 1 in 100


def make_class(folder: Path, size: int) -> dict[str, int]:
    kinds = {"correct": 0, "wrong": 0, "hostile": 0}
    for i in range(size):
        student = folder / f"student-{i:03d}@example.edu"
        core_submission(student)
        slot = i % 20
        if slot < 13:
            kinds["correct"] += 1
        elif slot < 17:
            kinds["wrong"] += 1
            name, (old, new) = list(WRONG.items())[i % len(WRONG)]
            path = student / name
            path.write_text(path.read_text().replace(old, new))
        else:
            kinds["hostile"] += 1
            name, code = HANG if i % 100 == 99 else HOSTILE[i % len(HOSTILE)]
            path = student / name
            path.write_text(code + path.read_text())
    return kinds


def _tree_pss(root_pid: int) -> int:
    """Proportional set size of a process and all its descendants, in bytes."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                    break
        except OSError:
            continue
    return total


def class_scale(size: int = 200, jobs: int = 2, kit: Path = ROOT) -> dict[str, float]:
    """Grade a generated class with ``batch`` (the grader of the checkout ``kit``); print and
    return the figures.

    CPU seconds (the machine's, ``_cpu``) are reported beside wall time: on a machine whose
    cores sit idle while a worker hangs they are the figure that says what grading costs.
    """
    with tempfile.TemporaryDirectory(prefix="attention-kit-bench-") as tmp:
        one = core_submission(Path(tmp) / "one")
        baseline = torch_import()
        cpu0 = _cpu()
        single = seconds([sys.executable, "-m", "grader", "grade", str(one)], repeats=1, cwd=kit)
        single_cpu = _cpu() - cpu0
        folder = Path(tmp) / "class"
        folder.mkdir()
        kinds = make_class(folder, size)
        command = [sys.executable, "-m", "grader", "batch", str(folder), "--csv",
                   str(Path(tmp) / "grades.csv"), "--json-dir", str(Path(tmp) / "json"),
                   "--jobs", str(jobs)]
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=kit, stdout=subprocess.DEVNULL)
        peak = [0]

        def sample() -> None:
            while process.poll() is None:
                peak[0] = max(peak[0], _tree_pss(process.pid))
                time.sleep(0.5)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        cpu0 = _cpu()
        process.wait()
        wall = time.perf_counter() - start
        cpu = _cpu() - cpu0
        sampler.join()
        with open(Path(tmp) / "grades.csv", newline="") as handle:
            graded = sum(row["status"] == "graded" for row in csv.DictReader(handle))
        report = seconds([sys.executable, "-m", "grader", "report", str(Path(tmp) / "json"),
                          "--csv", str(Path(tmp) / "grades.csv"), "--out",
                          str(Path(tmp) / "report")], repeats=1)
        summary = json.loads((Path(tmp) / "report" / "summary.json").read_text())
        alike, flagged = similar_cost(folder)
    per_submission = wall * jobs / size
    figures = {"size": size, "jobs": jobs, "wall": wall, "per_minute": size / wall * 60,
               "report": report, "report_share": report / wall, "similarity": alike,
               "similarity_share": alike / wall,
               "peak_mib": peak[0] / (1 << 20), "single": single,
               "ratio": per_submission / single, "cpu_per_submission": cpu / size,
               "single_cpu": single_cpu, "cpu_ratio": cpu / size / single_cpu,
               "torch": baseline, "torch_ratio": wall * 200 / size / baseline}
    print(f"class of {size} ({kinds['correct']} correct, {kinds['wrong']} wrong, "
          f"{kinds['hostile']} hostile; the six core files each), --jobs {jobs}: "
          f"{graded} graded")
    before = f"; {BEFORE['class_wall']:.0f} s before" if kit == ROOT else ""
    print(f"batch wall time:        {wall:6.1f} s (target < 180 s for 200 on 2 cores{before})")
    print(f"for 200, against torch: {figures['torch_ratio']:6.1f}x `import torch` "
          f"({baseline:.2f} s this run; target < 60x, the moonshot 40x)")
    print(f"submissions per minute: {figures['per_minute']:6.1f}")
    print(f"peak memory (PSS):      {figures['peak_mib']:6.0f} MiB")
    print(f"one `grader grade`:     {single:6.2f} s")
    print(f"per submission:         {per_submission:6.2f} s of one core "
          f"({figures['ratio']:.2f}x one `grader grade`)")
    print(f"CPU per submission:     {cpu / size:6.2f} s (target < 1.2 s), against "
          f"{single_cpu:.2f} s for one `grader grade` ({figures['cpu_ratio']:.2f}x"
          + (f"; {BEFORE['class_cpu']:.2f} s before)" if kit == ROOT else ")"))
    print(f"projected for 200 on {counted(jobs, 'idle core')}: "
          f"{200 * cpu / size / jobs:6.0f} s")
    print(f"class report:           {report:6.2f} s, {100 * report / wall:.1f}% of the batch "
          "time (target < 5%; `grader report` from its --json-dir, a fresh process)")
    print(f"similar submissions:    {alike:6.2f} s, {100 * alike / wall:.1f}% of the batch "
          f"time (target < 10%; every file made distinct, {counted(flagged, 'pair')} "
          "flagged)")
    top = ", ".join(f"{m} {e['count']}" for m, e in list(summary["misconceptions"].items())[:3])
    print(f"top misconceptions:     {top or 'none'}")
    return figures


def honest_cost(size: int = 20, jobs: int = 2, kit: Path = ROOT) -> dict[str, float]:
    """The CPU of one more honest submission in a class: ``batch --jobs`` of ``size`` and of
    twice ``size`` correct core submissions (the machine's CPU seconds, ``_cpu``, every process
    of the batch), the difference over ``size``, so that what a batch costs once (start-up, the
    key graded first) is left out; against the CPU of one fresh ``grader grade`` of the whole
    answer key in the same run. Target: under 0.1x."""
    cpu: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="attention-kit-bench-") as tmp:
        cpu0 = _cpu()
        seconds([sys.executable, "-m", "grader", "grade", str(kit / "solutions")], repeats=1,
                cwd=kit)
        key_cpu = _cpu() - cpu0
        for count in (size, 2 * size):
            folder = Path(tmp) / f"class-{count}"
            for i in range(count):
                core_submission(folder / f"student-{i:03d}@example.edu")
            cpu0 = _cpu()
            seconds([sys.executable, "-m", "grader", "batch", str(folder), "--csv",
                     str(Path(tmp) / f"grades-{count}.csv"), "--jobs", str(jobs)], repeats=1,
                    cwd=kit)
            cpu[count] = _cpu() - cpu0
    one = (cpu[2 * size] - cpu[size]) / size
    print(f"an honest submission:   {one:6.2f} s of CPU (one more correct submission in a batch: "
          f"{cpu[2 * size]:.1f} s for {2 * size}, {cpu[size]:.1f} s for {size}), "
          f"{one / key_cpu:.2f}x one fresh `grader grade` of the key ({key_cpu:.2f} s; "
          "target < 0.1x)")
    return {"honest_cpu": one, "key_cpu": key_cpu, "honest_ratio": one / key_cpu}


def similar_cost(folder: Path) -> tuple[float, int]:
    """Seconds to compare every pair of the class's files (``similarity.compare``, what
    ``batch --report`` adds), each file first made distinct by a comment naming its student
    (no two fingerprinted or compared as one); and the pairs flagged."""
    from grader.integrations.outputs import similarity

    for path in sorted(folder.rglob("*.py")):
        path.write_text(path.read_text() + f"# {path.parent.name}\n")
    start = time.perf_counter()
    found = similarity.compare({p.name: p for p in sorted(folder.iterdir()) if p.is_dir()},
                               load())
    return time.perf_counter() - start, len(found.pairs)


def _class_notebooks(course: Path, classroom: Path) -> list[str]:
    """Each submission folder under ``classroom`` as a notebook in ``course/submitted/``: the
    release, each answer cell holding that student's file as a student would paste it."""
    from grader.integrations.routes import notebook

    release = json.loads((course / "release/attention/attention.ipynb").read_text())
    students = sorted(p.name for p in classroom.iterdir())
    for student in students:
        nb = json.loads(json.dumps(release))
        for cell in nb["cells"]:
            name = cell["metadata"]["nbgrader"]["grade_id"]
            path = classroom / student / f"{name}.py"
            if cell["metadata"]["nbgrader"].get("solution") and path.is_file():
                cell["source"] = f"%%exercise {name}\n" + notebook.split_solution(
                    path.read_text())[1]
        folder = course / "submitted" / student / "attention"
        folder.mkdir(parents=True)
        (folder / "attention.ipynb").write_text(json.dumps(nb))
    return students


def _timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (the machine's, ``_cpu``) of one command."""
    cpu0, start = _cpu(), time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, check=True, capture_output=True)
    return time.perf_counter() - start, _cpu() - cpu0


def notebook_class(size: int = 200, jobs: int = 2, plain: int = 4) -> dict[str, float]:
    """The batch bench's class as notebooks (release filled with each student's files):
    ``python -m grader nbgrader autograde --jobs`` on all of them, and plain ``nbgrader
    autograde`` against the isolated one on the same first ``plain`` notebooks (correct ones:
    plain autograde has no time limit short of its cell timeout). Seconds per notebook."""
    try:
        import nbgrader  # noqa: F401
    except ImportError:
        print("notebooks:              not measured (nbgrader is not installed: make bench "
              "installs it)")
        return {}
    from grader.integrations.routes import notebook

    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    nbgrader_cli = [sys.executable, "-m", "nbgrader"]
    isolated = [sys.executable, "-m", "grader", "nbgrader", "autograde", "--jobs", str(jobs),
                "--course"]
    with tempfile.TemporaryDirectory(prefix="attention-kit-bench-") as tmp:
        template = Path(tmp) / "template"
        notebook.build(template)
        subprocess.run([*nbgrader_cli, "generate_assignment", "attention"], cwd=template,
                       env=env, check=True, capture_output=True)
        classroom = Path(tmp) / "class"
        classroom.mkdir()
        kinds = make_class(classroom, size)
        courses = {}
        for name in ("class", "plain", "isolated"):
            courses[name] = Path(tmp) / f"course-{name}"
            shutil.copytree(template, courses[name])
        students = _class_notebooks(courses["class"], classroom)
        for name in ("plain", "isolated"):
            for student in students[:plain]:
                shutil.copytree(courses["class"] / "submitted" / student,
                                courses[name] / "submitted" / student)
        if plain > 0:  # --plain-notebooks 0: the class alone
            plain_wall, plain_cpu = _timed([*nbgrader_cli, "autograde", "attention"],
                                           courses["plain"], env)
            small_wall, small_cpu = _timed([*isolated, str(courses["isolated"])], Path(tmp),
                                           env)
        wall, cpu = _timed([*isolated, str(courses["class"])], Path(tmp), env)
    figures = {"size": size, "jobs": jobs, "wall": wall, "cpu_per_notebook": cpu / size}
    print(f"notebooks: the class of {size} as notebooks ({kinds['correct']} correct, "
          f"{kinds['wrong']} wrong, {kinds['hostile']} hostile)")
    if plain > 0:
        figures.update({"plain_per_notebook": plain_wall / plain, "plain_cpu": plain_cpu / plain,
                        "small_per_notebook": small_wall / plain, "small_cpu": small_cpu / plain})
        print(f"plain nbgrader autograde:   {plain_wall / plain:6.2f} s per notebook "
              f"({plain_cpu / plain:.2f} s CPU; {counted(plain, 'notebook')}, serial)")
        print(f"isolated autograde, same:   {small_wall / plain:6.2f} s per notebook "
              f"({small_cpu / plain:.2f} s CPU; the same {plain}, --jobs {jobs}, start-up "
              "included)")
    faster = f", {plain_wall / plain / (wall / size):.1f}x faster than plain" if plain > 0 else ""
    print(f"isolated autograde, class:  {wall / size:6.2f} s per notebook "
          f"({cpu / size:.2f} s CPU; {wall:.0f} s for {size}, --jobs {jobs}; "
          f"{BEFORE['notebooks_wall']:.0f} s before){faster}")
    plain_line = f", plain {200 * plain_wall / plain:6.0f} s" if plain > 0 else ""
    print(f"projected for 200 on {counted(jobs, 'idle core')}: isolated "
          f"{200 * cpu / size / jobs:6.0f} s "
          f"(target < 200 s){plain_line}")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.bench", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Time grading against a baseline measured in the same run (make bench).",
        epilog="example:\n  python -m tools.bench --class-size 40 --notebooks 0")
    parser.add_argument("--class-size", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--class-only", action="store_true", help="skip the import-ratio part")
    parser.add_argument("--notebooks", type=int, default=200,
                        help="the class as notebooks, for the isolated autograde (0: skip)")
    parser.add_argument("--plain-notebooks", type=int, default=4,
                        help="of those, how many plain nbgrader autograde runs too")
    parser.add_argument("--neighbours", type=int, default=1,
                        help="the slowdown of an honest student beside a CPU-hungry one (0: skip)")
    parser.add_argument("--parse-cost", type=int, default=3,
                        help="the grading process's own cost beside the worst helper files: "
                             "rounds of it (0: skip)")
    parser.add_argument("--against", type=Path, default=None,
                        help="another checkout of the kit: its key ratios measured in this run")
    parser.add_argument("--breakdown", action=argparse.BooleanOptionalAction, default=True,
                        help="first, where grading time goes (bench_profile)")
    parser.add_argument("--breakdown-only", action="store_true", help="only the breakdown")
    args = parser.parse_args(argv)
    if args.breakdown or args.breakdown_only:
        breakdowns()
        if args.breakdown_only:
            return 0
        print()
    if not args.class_only:
        with tempfile.TemporaryDirectory(prefix="attention-kit-bench-") as tmp:
            key = core_submission(Path(tmp) / "key")
            kit = [sys.executable, "-m", "grader", "grade"]
            commands = {
                "torch": ([sys.executable, "-c", "import torch"], ROOT),
                "core": ([*kit, str(key)], ROOT),
                "whole": ([*kit, str(ROOT / "solutions")], ROOT),
                "one": ([*kit, str(key), "--exercise", "softmax"], ROOT)}
            if args.against is not None:  # the other kit's grader, from its own folder
                commands["other core"] = ([*kit, str(key)], args.against)
                commands["other whole"] = ([*kit, str(args.against / "solutions")],
                                           args.against)
            times = interleaved(commands)
        baseline, core, grade, one = (times[n] for n in ("torch", "core", "whole", "one"))
        if args.against is not None:
            other = [times["other core"] / baseline, times["other whole"] / baseline]
        print(f"import torch:           {baseline:6.2f} s (median of 3, in turns with the "
              "three below)")
        print(f"grade the answer key:   {core:6.2f} s (median of 3; the six core exercises)")
        print(f"ratio:                  {core / baseline:6.2f}x (target < 1.2x; "
              f"{BEFORE['core']:.1f}x before)")
        print(f"with the bonus track:   {grade:6.2f} s (all of solutions/, "
              f"{len(load().names())} exercises), "
              f"{grade / baseline:.2f}x (target < 1.3x; {BEFORE['whole']:.1f}x before)")
        print(f"one exercise:           {one:6.2f} s (`grade --exercise softmax`, median of 3), "
              f"{one / baseline:.2f}x (target < 1.3x)")
        if args.against is not None:
            print(f"{str(args.against)[:22]:<22}  {other[0]:6.2f}x, with the bonus track "
                  f"{other[1]:.2f}x (measured in this run)")
    if args.parse_cost:
        parse_cost(args.parse_cost)
    if args.neighbours:
        neighbours(args.jobs)
    if args.class_size:
        fork_cost()
        honest_cost(jobs=args.jobs)
        if args.against is not None:
            print(f"the same, graded by {args.against}:")
            honest_cost(jobs=args.jobs, kit=args.against)
    if args.notebooks:
        notebook_class(args.notebooks, args.jobs, min(args.plain_notebooks, args.notebooks))
    if args.class_size:
        figures = class_scale(args.class_size, args.jobs)
        if args.against is not None:
            print(f"the same class, graded by {args.against}:")
            other = class_scale(args.class_size, args.jobs, kit=args.against)
            cpu = figures["cpu_per_submission"] / other["cpu_per_submission"]
            print(f"this kit against it:    wall {figures['wall'] / other['wall']:.2f}x, "
                  f"CPU per submission {cpu:.2f}x (measured in this run)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
