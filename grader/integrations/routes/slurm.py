"""A class graded on a Slurm cluster: one job array of ``batch --shard``, then one ``merge``.

``python -m grader slurm DIR --shards N --out SHARED [--partition P] [--time T]
[--cpus-per-task C] [--mem M] [--account A] [--qos Q] [--constraint C] [--throttle K]
[--merge-mem M] [--sbatch-arg ARG ...] [--submit]`` writes

- ``SHARED/grade.sbatch``: an array job, ``--array=0-(N-1)`` (``%K`` with ``--throttle K``);
  task K runs ``python -m grader batch DIR --shard K/N --json-dir SHARED/results --jobs C``,
  its log in ``SHARED/logs/grade-<job>_<K>.out``;
- ``SHARED/merge.sbatch``: ``python -m grader merge SHARED/results --submissions DIR --csv
  SHARED/grades.csv --report SHARED/report``, its log in ``SHARED/logs/merge-<job>.out``, to
  run once every task has ended, however it ended (``--dependency=afterany:<array job>``).

Both run as the user who submits them, as every job on a Slurm site does; each task checks its
node as ``batch`` does (``grader.sandbox.node``: namespaces, from a user namespace where the
kernel gives one) and its rows name the isolation it had. With ``--submit`` both are submitted
(``sbatch --parsable``) and their ids printed with the command that watches them. A task that
failed or was cancelled leaves its students without a result, and the merge runs all the same:
they get ``not graded: no result (shard K of N)``. Rerun that task alone with ``sbatch
--array=K SHARED/grade.sbatch``, then the merge after it.

The scripts name this interpreter and this kit by absolute path: both, the submissions and
SHARED must be on a file system every node mounts at the same path.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from ...core.course import KIT_ROOT
from ...core.plural import noun
from . import shards

GRADE = "grade.sbatch"
MERGE = "merge.sbatch"


def _line(words: list[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)


def _grader(args: argparse.Namespace, command: str) -> list[str]:
    """``python -m grader COMMAND`` with the options every command of the run shares."""
    return [sys.executable, "-m", "grader", command,
            *(["--course", str(Path(args.course).resolve())] if args.course else [])]


def _options(args: argparse.Namespace) -> list[str]:
    """The ``#SBATCH`` lines both jobs share: where they run, whose account, and any other
    option given as ``--sbatch-arg``."""
    lines = [f"#SBATCH --chdir={KIT_ROOT}", "#SBATCH --ntasks=1"]
    for option in ("partition", "time", "account", "qos", "constraint"):
        value = getattr(args, option, None)
        if value:
            if any(c.isspace() for c in str(value)):
                raise ValueError(f"--{option} {value!r}: a value with blanks cannot be an "
                                 "#SBATCH line")
            lines.append(f"#SBATCH --{option}={value}")
    for word in getattr(args, "sbatch_arg", None) or []:
        if not word.startswith("-") or any(c in word for c in "\n\r"):
            raise ValueError(f"--sbatch-arg {word!r}: give one sbatch option, as "
                             "--sbatch-arg=--mail-type=END")
        lines.append(f"#SBATCH {word}")
    return lines


def scripts(args: argparse.Namespace) -> dict[str, str]:
    """The two job scripts' text, by file name (see the module docstring)."""
    if args.shards < 1:
        raise ValueError(f"--shards {args.shards}: the number of array tasks must be 1 or more")
    if args.cpus_per_task < 1:
        raise ValueError(f"--cpus-per-task {args.cpus_per_task}: must be 1 or more")
    throttle = getattr(args, "throttle", None)
    if throttle is not None and throttle < 1:
        raise ValueError(f"--throttle {throttle}: at least one task must run at a time")
    folder = Path(args.dir).resolve()
    if not folder.is_dir():
        raise ValueError(f"{args.dir} is not a folder of submissions")
    out = Path(args.out).resolve()
    results, logs = out / "results", out / "logs"
    common = _options(args)
    array = f"0-{args.shards - 1}" + (f"%{throttle}" if throttle else "")
    grade = [
        "#!/bin/bash", "# attention-kit: grade one shard of the class (python -m grader slurm)",
        f"# Runs as the user who submits it. Log: {logs}/grade-<job>_<task>.out; each "
        f"student's result: {results}/<student>.json",
        "#SBATCH --job-name=attention-grade", f"#SBATCH --array={array}",
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
    merge_mem = getattr(args, "merge_mem", None)
    merge = [
        "#!/bin/bash", "# attention-kit: the class's files from every shard's results",
        f"# Runs as the user who submits it, after every grade task ended (afterany). Log: "
        f"{logs}/merge-<job>.out; reads {results}; writes {out / 'grades.csv'} and "
        f"{out / 'report'}",
        "#SBATCH --job-name=attention-merge", "#SBATCH --cpus-per-task=1",
        f"#SBATCH --output={logs}/merge-%j.out", *common,
        *([f"#SBATCH --mem={merge_mem}"] if merge_mem else []), "set -euo pipefail",
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


def warn_about_this_node(trusted: bool) -> None:
    """Say what this machine would give the workers, where it is less than root's: the nodes
    are often alike. Without namespaces, each task would stop before grading."""
    from ...sandbox import node

    found = node.check()
    if not found.isolated and not trusted:
        print(f"warning: {'; '.join(found.missing)}. If the compute nodes are alike, each "
              "task will stop before grading: run there where the kernel gives user "
              "namespaces, or pass --trust-submissions if every submission is trusted",
              file=sys.stderr)
    elif found.label(trusted):
        print(f"isolation on this machine: {found.label(trusted)} (each task checks its own "
              "node; the rows say what it had)", file=sys.stderr)


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
    warn_about_this_node(args.trust_submissions)
    print(f"wrote {out / GRADE} ({args.shards} array tasks) and {out / MERGE}")
    if not args.submit:
        print(f"submit: grade=$(sbatch --parsable {out / GRADE}) && sbatch "
              f"--dependency=afterany:$grade {out / MERGE}")
        return 0
    grade = sbatch(str(out / GRADE))
    merge = sbatch(f"--dependency=afterany:{grade}", str(out / MERGE))
    print(f"grade job: {grade}\nmerge job: {merge}")
    print(f"watch: squeue -j {grade},{merge}   (logs in {out / 'logs'}; then "
          f"{out / 'grades.csv'} and {out / 'report'})")
    return 0
