"""A class graded in N slices by tasks that never talk to each other, then merged as one batch.

``python -m grader batch DIR --shard K/N --json-dir RESULTS`` grades the K-th (0-based) of N
slices of DIR's submission folders: the folders ``batch`` would grade, sorted by name, cut
into N runs of consecutive folders whose sizes differ by one at most, so every task computes
the same slices from the folder alone. K and N may come from the engine instead:

- Slurm job arrays: ``SLURM_ARRAY_TASK_ID``, with ``SLURM_ARRAY_TASK_COUNT`` (or
  ``SLURM_ARRAY_TASK_MIN``/``MAX``) for N; K counts from the array's first index;
- Kubernetes Indexed Jobs: ``JOB_COMPLETION_INDEX``, with ``--shards N`` (the Job's
  ``completions``); ``--shards N`` also takes K from ``SLURM_ARRAY_TASK_ID`` as it stands.

A task writes, as each student is done, what ``batch --json-dir`` writes:
``RESULTS/<student>.json`` (graded students) and the student's record,
``RESULTS/.records/<student>.json`` (``grader.core.records``: every student, the record exactly
as ``batch`` holds it, with the shard that graded it), each replaced whole, never half written.
``python -m grader merge RESULTS --submissions DIR`` reads the records back in DIR's order: the
same records as one ``batch`` over DIR, which the same code then writes
(``class_commands.write_class``), so the files are byte-identical. A student with no record
keeps one that says so, ``not graded: no result (shard K of N)``: rerun that shard, merge
again.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ...core import records
from ...core.plural import counted
from ...core.results import StudentRecord
from ..outputs import inert
from .batch import find_submissions

FOLDER = ".shards"  # in the results folder; a hidden name, so `report` reads past it
PLAN = "plan.json"  # {"shards": N}: how the class was cut, for students no task reached
NO_RESULT = "not graded: no result (shard {index} of {count})"


class ShardError(ValueError):
    """A shard that cannot be chosen: the message says which setting is wrong."""


@dataclass(frozen=True)
class Shard:
    index: int  # K, 0-based
    count: int  # N
    source: str = "--shard"  # where K and N came from, for the log

    def __str__(self) -> str:
        return f"shard {self.index} of {self.count}"


def parse(text: str) -> Shard:
    """``K/N`` with ``0 <= K < N``."""
    index, slash, count = text.partition("/")
    if not slash:
        raise ShardError(f"--shard {text!r}: write K/N, e.g. 0/3 (the first of 3 slices)")
    return _checked(_integer(index, "--shard K"), _integer(count, "--shard N"), "--shard")


def choose(shard: str | None, shards: int | None,
           environ: Mapping[str, str] = os.environ) -> Shard | None:
    """The slice this task grades: ``--shard K/N``, else from the environment (see the module
    docstring), else None (the whole folder)."""
    if shard is not None:
        if shards is not None:
            raise ShardError("give --shard K/N or --shards N, not both")
        return parse(shard)
    task = environ.get("SLURM_ARRAY_TASK_ID")
    if shards is not None:
        if shards < 1:
            raise ShardError(f"--shards {shards}: the number of slices must be 1 or more")
        if task is not None:
            return _checked(_integer(task, "SLURM_ARRAY_TASK_ID"), shards,
                            "SLURM_ARRAY_TASK_ID and --shards")
        index = environ.get("JOB_COMPLETION_INDEX")
        if index is not None:
            return _checked(_integer(index, "JOB_COMPLETION_INDEX"), shards,
                            "JOB_COMPLETION_INDEX and --shards")
        raise ShardError("--shards N needs the task's index: --shard K/N, or run it as a Slurm "
                         "array task (SLURM_ARRAY_TASK_ID) or a Kubernetes Indexed Job "
                         "(JOB_COMPLETION_INDEX)")
    if task is not None:
        first = _integer(environ.get("SLURM_ARRAY_TASK_MIN", "0"), "SLURM_ARRAY_TASK_MIN")
        if "SLURM_ARRAY_TASK_COUNT" in environ:
            count = _integer(environ["SLURM_ARRAY_TASK_COUNT"], "SLURM_ARRAY_TASK_COUNT")
        elif "SLURM_ARRAY_TASK_MAX" in environ:
            count = _integer(environ["SLURM_ARRAY_TASK_MAX"], "SLURM_ARRAY_TASK_MAX") - first + 1
        else:
            raise ShardError("SLURM_ARRAY_TASK_ID is set without SLURM_ARRAY_TASK_COUNT or "
                             "SLURM_ARRAY_TASK_MAX: pass --shards N")
        return _checked(_integer(task, "SLURM_ARRAY_TASK_ID") - first, count,
                        "SLURM_ARRAY_TASK_ID/COUNT")
    if "JOB_COMPLETION_INDEX" in environ:
        raise ShardError("JOB_COMPLETION_INDEX is set but not the number of slices: pass "
                         "--shards N (the Job's completions)")
    return None


def _integer(text: str, name: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ShardError(f"{name} is {text!r}, not a whole number") from None


def _checked(index: int, count: int, source: str) -> Shard:
    if count < 1 or not 0 <= index < count:
        raise ShardError(f"{source}: shard {index} of {count} does not exist (K counts from 0 "
                         "and is less than N)")
    return Shard(index, count, source)


# -- slices -----------------------------------------------------------------------------------
def bounds(total: int, index: int, count: int) -> tuple[int, int]:
    """The positions [start, end) of slice ``index`` of ``count`` over ``total`` items."""
    return index * total // count, (index + 1) * total // count


def select(items: Sequence[Any], shard: Shard) -> list[Any]:
    start, end = bounds(len(items), shard.index, shard.count)
    return list(items[start:end])


def owner(position: int, total: int, count: int) -> int:
    """The slice that holds the item at ``position``."""
    return next(k for k in range(count) if position < bounds(total, k, count)[1])


# -- what a task leaves ------------------------------------------------------------------------
def write_plan(results: str | os.PathLike[str], count: int) -> None:
    records.replace(Path(results) / FOLDER / PLAN, json.dumps({"shards": count}) + "\n")


def recorder(results: str | os.PathLike[str], shard: Shard, warnings: TextIO = sys.stderr):
    """``batch.run``'s ``on_record`` for a shard: the student's JSON, then the record. A record
    that cannot be written costs that student only (merge then names it: no result)."""
    from ..outputs.report import write_instructor_json

    folder = Path(results)
    write_plan(folder, shard.count)

    def record(done: StudentRecord) -> None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            write_instructor_json(done, folder)
            records.write(folder, done, shard=shard.index, shards=shard.count)
        except (OSError, ValueError) as error:
            warnings.write(f"warning: {done.student}: its result could not be written "
                           f"({error}); merge will list it without one\n")

    return record


# -- merging ----------------------------------------------------------------------------------
def merge(results: str | os.PathLike[str], submissions: str | os.PathLike[str],
          warnings: TextIO | None = sys.stderr) -> list[StudentRecord]:
    """The records one ``batch`` over ``submissions`` would give, from the tasks' records in
    ``results``; a student no task recorded gets ``not graded: no result (shard K of N)``."""
    folder = Path(results)
    if not folder.is_dir():
        raise ShardError(f"{folder} is not a folder of results (batch --shard ... --json-dir)")
    names = [inert.name(p.name) for p in find_submissions(Path(submissions), warnings)]
    found: dict[str, StudentRecord] = {}
    counts: Counter[int] = Counter()
    for student, (record, kept) in records.read(folder).items():
        found[student] = record
        with contextlib.suppress(KeyError, TypeError, ValueError):
            counts[int(kept["shards"])] += 1
    stray = sorted(set(found) - set(names))
    if stray and warnings is not None:
        warnings.write(f"warning: left out {counted(len(stray), 'result')} of no submission "
                       "folder in "
                       f"{submissions}: {', '.join(stray)}\n")
    count = _planned(folder) or (max(counts, key=lambda n: (counts[n], n)) if counts else None)
    merged = []
    for position, name in enumerate(names):
        if name in found:
            merged.append(found[name])
        elif count is None:
            merged.append(StudentRecord(name, "not graded: no result (no shard recorded any)",
                                        "no result"))
        else:
            merged.append(StudentRecord(name, NO_RESULT.format(
                index=owner(position, len(names), count), count=count), "no result"))
    return merged


def _planned(folder: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        count = int(json.loads((folder / FOLDER / PLAN).read_text())["shards"])
        return count if count >= 1 else None
    return None


def recorded(results: str | os.PathLike[str]) -> int:
    """How many students' records ``results`` holds (from an earlier run, say): counted, not
    read."""
    kept = Path(results) / records.FOLDER
    return sum(1 for p in kept.glob("*.json") if not p.name.startswith(".")) if kept.is_dir() \
        else 0
