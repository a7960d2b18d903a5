"""A class graded on a Slurm cluster: one job array of ``batch --shard``, then one ``merge``.

``python -m grader slurm DIR --shards N --out SHARED [--partition P] [--time T]
[--cpus-per-task C] [--mem M] [--submit]`` writes

- ``SHARED/grade.sbatch``: an array job, ``--array=0-(N-1)``; task K runs ``python -m grader
  batch DIR --shard K/N --json-dir SHARED/results --jobs C`` (its log in ``SHARED/logs``);
- ``SHARED/merge.sbatch``: ``python -m grader merge SHARED/results --submissions DIR --csv
  SHARED/grades.csv --report SHARED/report``, to run once the array succeeded
  (``--dependency=afterok:<array job>``).

With ``--submit`` both are submitted (``sbatch --parsable``) and their ids printed with the
command that watches them. A task that failed or was cancelled leaves its students without a
result; the merge job then never runs (afterok): rerun that task alone with
``sbatch --array=K SHARED/grade.sbatch``, then submit ``merge.sbatch`` again.

The scripts name this interpreter and this kit by absolute path: both, the submissions and
SHARED must be on a file system every node mounts at the same path.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from ..core.engine import KIT_ROOT
from ..core.plural import noun
from . import shards

GRADE = "grade.sbatch"
MERGE = "merge.sbatch"


def _line(words: list[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)


def _grader(args: argparse.Namespace, command: str) -> list[str]:
    """``python -m grader COMMAND`` with the options every command of the run shares."""
    return [sys.executable, "-m", "grader", command,
            *(["--course", str(Path(args.course).resolve())] if args.course else [])]


def scripts(args: argparse.Namespace) -> dict[str, str]:
    """The two job scripts' text, by file name (see the module docstring)."""
    if args.shards < 1:
        raise ValueError(f"--shards {args.shards}: the number of array tasks must be 1 or more")
    if args.cpus_per_task < 1:
        raise ValueError(f"--cpus-per-task {args.cpus_per_task}: must be 1 or more")
    folder = Path(args.dir).resolve()
    if not folder.is_dir():
        raise ValueError(f"{args.dir} is not a folder of submissions")
    out = Path(args.out).resolve()
    results, logs = out / "results", out / "logs"
    common = [f"#SBATCH --chdir={KIT_ROOT}", "#SBATCH --ntasks=1"]
    for option, value in (("partition", args.partition), ("time", args.time)):
        if value:
            common.append(f"#SBATCH --{option}={value}")
    grade = [
        "#!/bin/bash", "# attention-kit: grade one shard of the class (python -m grader slurm)",
        "#SBATCH --job-name=attention-grade", f"#SBATCH --array=0-{args.shards - 1}",
        f"#SBATCH --cpus-per-task={args.cpus_per_task}", f"#SBATCH --output={logs}/grade-%A_%a.out",
        *common, *([f"#SBATCH --mem={args.mem}"] if args.mem else []),
        "set -euo pipefail",
        "# K from the task's index, N written here: `sbatch --array=K` reruns exactly shard K",
        "exec " + _line([*_grader(args, "batch"), str(folder)]) + ' --shard '
        f'"${{SLURM_ARRAY_TASK_ID}}/{args.shards}" ' + _line([
            "--json-dir", str(results), "--timeout", f"{args.timeout:g}", "--memory",
            f"{args.memory:g}", "--call-timeout", f"{args.call_timeout:g}",
            *(["--no-key"] if args.no_key else []),
            *(["--trust-submissions"] if args.trust_submissions else [])])
        + f' --jobs "${{SLURM_CPUS_PER_TASK:-{args.cpus_per_task}}}"',
    ]
    class_options = [*(["--roster", str(Path(args.roster).resolve())] if args.roster else []),
                     *(word for kind, path in args.export or []
                       for word in ("--export", kind, str(Path(path).resolve()))),
                     "--assignment", args.assignment]
    merge = [
        "#!/bin/bash", "# attention-kit: the class's files from every shard's results",
        "#SBATCH --job-name=attention-merge", "#SBATCH --cpus-per-task=1",
        f"#SBATCH --output={logs}/merge-%j.out", *common, "set -euo pipefail",
        "exec " + _line([*_grader(args, "merge"), str(results), "--submissions", str(folder),
                         "--csv", str(out / "grades.csv"), "--report", str(out / "report"),
                         *class_options]),
    ]
    return {GRADE: "\n".join(grade) + "\n", MERGE: "\n".join(merge) + "\n"}


def write(args: argparse.Namespace) -> Path:
    out = Path(args.out).resolve()
    texts = scripts(args)
    for sub in ("results", "logs"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (out / name).write_text(text)
        (out / name).chmod(0o755)
    shards.write_plan(out / "results", args.shards)
    return out


def sbatch(*words: str) -> str:
    """Submit with ``sbatch --parsable``: the job id (``ID`` or ``ID;CLUSTER``, the id kept)."""
    done = subprocess.run(["sbatch", "--parsable", *words], capture_output=True, text=True,
                          timeout=120)
    if done.returncode != 0:
        raise OSError(f"sbatch {' '.join(words)} failed: {done.stderr.strip() or done.stdout}")
    return done.stdout.strip().split(";")[0]


def main(args: argparse.Namespace) -> int:
    out = Path(args.out).resolve()
    earlier = shards.recorded(out / "results")
    if args.submit and earlier:
        whose = noun(earlier, "student's", "students'")
        raise ValueError(f"{out / 'results'} already holds {earlier} {whose} results of an "
                         "earlier run, which merge would take as this run's: choose another "
                         f"--out, or remove {out / 'results'} (to rerun one task K: sbatch "
                         f"--array=K {out / GRADE})")
    write(args)
    print(f"wrote {out / GRADE} ({args.shards} array tasks) and {out / MERGE}")
    if not args.submit:
        print(f"submit: grade=$(sbatch --parsable {out / GRADE}) && sbatch "
              f"--dependency=afterok:$grade {out / MERGE}")
        return 0
    grade = sbatch(str(out / GRADE))
    merge = sbatch(f"--dependency=afterok:{grade}", str(out / MERGE))
    print(f"grade job: {grade}\nmerge job: {merge}")
    print(f"watch: squeue -j {grade},{merge}   (logs in {out / 'logs'}; then "
          f"{out / 'grades.csv'} and {out / 'report'})")
    return 0
