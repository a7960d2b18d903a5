"""``make bench``: seconds to grade the answer key, as a ratio to ``python -c "import torch"``.

Both are measured in the same run, as fresh processes, so machine load affects them alike.
The target is a ratio under 3.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
