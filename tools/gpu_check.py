"""``make gpu-check``: the CUDA path on real hardware, in one short run.

Grades the answer key (the `mha`, `gqa` and `decode` checks then run on the CPU and on CUDA),
and a `mha` that builds one tensor on the CPU whatever the input's device (right on the CPU,
wrong on CUDA), once with ``grade`` and once in a batch (forked graders, workers forked from
the zygote, each starting CUDA on its own). Prints what it saw; exits 0 when the key scores
full marks on CUDA and the CPU-only module loses points there, 2 without a CUDA device.
"""

from __future__ import annotations

import csv
import shutil
import sys
import tempfile
import time
from pathlib import Path

from grader.core.course import KIT_ROOT

CPU_ONLY = ("        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, H, T, T)\n",
            "        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, H, T, T)\n"
            "        scores = scores + torch.zeros(t)  # made on the CPU, whatever x's device\n")


def main() -> int:
    import torch

    from grader.core import engine
    from grader.integrations.outputs import inert
    from grader.integrations.routes import batch

    if not torch.cuda.is_available():
        print("gpu-check: no CUDA device here (torch.cuda.is_available() is False)")
        if torch.version.cuda is None:  # make's default on Linux is torch's CPU build
            print(f"gpu-check: this torch ({torch.__version__}) is a CPU build: on a machine with "
                  "a GPU, rm -rf .venv && make gpu-check TORCH=cuda")
        return 2
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"{torch.cuda.get_device_name(0)}; devices graded: {engine.available_devices()}")
    failures = []
    with tempfile.TemporaryDirectory(prefix="attention-kit-gpu-") as tmp:
        key = Path(tmp) / "class" / "key"
        shutil.copytree(KIT_ROOT / "solutions", key)
        wrong = Path(tmp) / "class" / "cpu-only"
        shutil.copytree(KIT_ROOT / "solutions", wrong)
        source = (wrong / "mha.py").read_text()
        assert CPU_ONLY[0] in source
        (wrong / "mha.py").write_text(source.replace(*CPU_ONLY))
        for name, folder in (("key", key), ("cpu-only mha", wrong)):
            start = time.perf_counter()
            result = engine.grade_submission(folder)
            seconds = time.perf_counter() - start
            print(f"\n== grade {name}: {result.score} / {result.max_score}, bonus "
                  f"{result.bonus_score} / {result.bonus_max_score} ({seconds:.1f} s)")
            for exercise in result.results.values():
                failing = [c for c in exercise.checks if not c.passed]
                print(f"   {exercise.name:<20}{exercise.score:>5} / {exercise.max_score:<4}"
                      f"{exercise.error or ''}")
                for check in failing[:4]:
                    print(f"      FAIL {check.name}: "
                          f"{check.feedback.splitlines()[1] if check.feedback else ''}")
            if name == "key" and (result.score != 100 or
                                  result.bonus_score != result.bonus_max_score):
                failures.append("the answer key lost points")
            if name != "key" and result.results["mha"].score >= 25:
                failures.append("the CPU-only mha kept full marks: the CUDA checks did not run")
        start = time.perf_counter()
        rows = batch.run(Path(tmp) / "class", jobs=2, progress=None)
        with open(Path(tmp) / "grades.csv", "w", newline="") as handle:
            csv.writer(handle).writerows(inert.csv_row([r.student, r.status, r.total])
                                         for r in rows)
        print(f"\n== batch, --jobs 2 ({time.perf_counter() - start:.1f} s): " + ", ".join(
            f"{r.student} {r.total} ({r.status})" for r in rows))
        totals = {r.student: r.total for r in rows}
        if totals.get("key") != 100 or (totals.get("cpu-only") or 100) >= 100:
            failures.append("the batch disagrees with grade")
    print("\ngpu-check: " + ("OK" if not failures else "FAILED: " + "; ".join(failures)))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
