"""``make bench``: seconds to grade the answer key, as a ratio to ``python -c "import torch"``.

Both are measured in the same run, as fresh processes, so machine load affects them alike.
The target is a ratio under 3. With nbgrader installed it also reports seconds per notebook
for ``nbgrader autograde`` next to seconds per submission for ``python -m grader grade``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def seconds(command: list[str], repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    baseline = seconds([sys.executable, "-c", "import torch"])
    grade = seconds([sys.executable, "-m", "grader", "grade", "solutions"])
    print(f"import torch:           {baseline:6.2f} s (median of 3)")
    print(f"grade the answer key:   {grade:6.2f} s (median of 3)")
    print(f"ratio:                  {grade / baseline:6.2f}x (target < 3x)")
    notebook_seconds(grade)
    return 0


def notebook_seconds(per_submission: float, notebooks: int = 2) -> None:
    """Seconds per notebook for ``nbgrader autograde`` (the answer key filled into the release),
    printed next to seconds per submission for ``python -m grader grade``."""
    try:
        import nbgrader  # noqa: F401
    except ImportError:
        print("nbgrader autograde:     not measured (nbgrader is not installed: make bench "
              "installs it)")
        return
    from . import notebook

    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    nbgrader = [sys.executable, "-m", "nbgrader"]
    with tempfile.TemporaryDirectory(prefix="attention-kit-bench-") as tmp:
        course = Path(tmp)
        notebook.build(course)
        quiet = {"cwd": course, "env": env, "check": True, "capture_output": True}
        subprocess.run([*nbgrader, "generate_assignment", "attention"], **quiet)
        release = json.loads((course / "release/attention/attention.ipynb").read_text())
        source = json.loads((course / "source/attention/attention.ipynb").read_text())
        answers = {c["id"]: c["source"] for c in source["cells"]
                   if c["metadata"]["nbgrader"].get("solution")}
        for cell in release["cells"]:
            cell["source"] = answers.get(cell["id"], cell["source"])
        for number in range(notebooks):
            folder = course / "submitted" / f"student{number}" / "attention"
            folder.mkdir(parents=True)
            (folder / "attention.ipynb").write_text(json.dumps(release))
        start = time.perf_counter()
        subprocess.run([*nbgrader, "autograde", "attention"], **quiet)
        per_notebook = (time.perf_counter() - start) / notebooks
    print(f"nbgrader autograde:     {per_notebook:6.2f} s per notebook ({notebooks} answer-key "
          "notebooks, one run)")
    print(f"python -m grader grade: {per_submission:6.2f} s per submission (the answer key, "
          "median of 3)")


if __name__ == "__main__":
    raise SystemExit(main())
