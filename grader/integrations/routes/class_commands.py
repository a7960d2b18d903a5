"""The commands that grade or report on a class: batch, merge, slurm and report, each with
its options beside it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core.course import Course, load
from ...core.plural import counted
from .cli_common import isolated, isolation_note, limit_options, limits_of, trust_option

if TYPE_CHECKING:  # imported where used: a command loads only what it needs
    from ...core.results import StudentRecord
    from ..outputs.exports import Roster
    from .shards import Shard


def _batch(args: argparse.Namespace) -> int:
    from ...sandbox import node
    from . import shards

    try:  # before grading: a bad roster, export or shard costs nothing
        shard = shards.choose(args.shard, args.shards)
        _shard_outputs(args, shard)
        from ..outputs import exports

        roster = exports.load_for(args.export, args.roster)
    except ValueError as error:  # ShardError, RosterError
        print(f"error: {error}", file=sys.stderr)
        return 2
    found = node.check()  # before anything else starts: the probe forks
    if not isolated(found, args.trust_submissions):
        return 2
    note = isolation_note(found, args.trust_submissions)
    if note:  # before the progress bar: what the workers will have
        print(note, file=sys.stderr)
    if args.similarity_corpus and not Path(args.similarity_corpus).is_dir():
        print(f"error: {args.similarity_corpus} is not a folder", file=sys.stderr)
        return 2
    from ...core.course import DEFAULT_KEY
    from . import batch

    course = load(args.course)
    paths = batch.find_submissions(Path(args.dir))
    if shard is not None:
        paths = shards.select(paths, shard)
        print(f"{shard} ({shard.source}): {counted(len(paths), 'submission')}",
              file=sys.stderr)
    done = batch.run(args.dir, jobs=args.jobs, limits=limits_of(args), course=course,
                     key_folder=None if args.no_key else DEFAULT_KEY, paths=paths,
                     isolation=found.label(args.trust_submissions),
                     on_record=shards.recorder(args.json_dir, shard) if shard else None)
    if shard is not None:
        print(f"{shard}: {sum(r.status == 'graded' for r in done)} of {len(done)} "
              f"graded; wrote their results into {args.json_dir}", file=sys.stderr)
        return 0
    if args.json_dir:
        batch.write_json(done, args.json_dir)
    write_class(done, course, args, roster)
    return 0


def add_batch(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``batch`` command's options."""
    many = sub.add_parser("batch", parents=[common],
                          help="grade every submission folder under DIR into a CSV")
    many.add_argument("dir", help="a folder holding one submission folder per student")
    many.add_argument("--csv", metavar="FILE",
                      help="write the scores here (needed unless grading a shard)")
    many.add_argument("--json-dir", metavar="DIR",
                      help="also write <student>.json per student (instructor view), and "
                           "every student's record, which report and merge read")
    many.add_argument("--jobs", type=int, default=None,
                      help="submissions graded at once (default: the number of CPUs)")
    limit_options(many)
    many.add_argument("--no-key", action="store_true", help="ignore solutions/ even if present")
    many.add_argument("--report", metavar="DIR",
                      help="write the class report here (index.html, summary.json, summary.md)")
    _similarity_option(many)
    _class_options(many)
    _shard_options(many)
    many.set_defaults(func=_batch)


def _shard_outputs(args: argparse.Namespace, shard: Shard | None) -> None:
    """A shard writes results only (``merge`` writes the class's files); a whole batch a CSV."""
    if shard is None:
        if not args.csv:
            raise ValueError("batch needs --csv FILE (or --shard K/N with --json-dir)")
        return
    if not args.json_dir:
        raise ValueError(f"{shard} needs --json-dir DIR: the tasks' results are merged from "
                         "there (grader merge)")
    given = [name for name, value in (("--csv", args.csv), ("--report", args.report),
                                      ("--roster", args.roster), ("--export", args.export))
             if value]
    if given:
        raise ValueError(f"{shard} writes --json-dir only, not {', '.join(given)}: "
                         "grader merge writes the class's files once every shard is done (to "
                         "grade all of DIR here, run without --shard, --shards and "
                         "SLURM_ARRAY_TASK_ID)")


def write_class(rows: list[StudentRecord], course: Course, args: argparse.Namespace,
                roster: Roster | None) -> None:
    """The class's files from its records: the CSV, the roster's, the exports and the report.
    ``batch`` and ``merge`` both end here, so the same records give the same bytes."""
    from ..outputs import class_report, exports

    if roster is None:
        exports.write_grades(rows, args.csv, course)
    folder = getattr(args, "dir", None) or args.submissions  # batch's DIR, merge's
    similar = (_similar(course, folder, args.similarity_corpus,
                        no_key=getattr(args, "no_key", False)) if args.report else None)
    class_report.finish(rows, course, report_dir=args.report, roster=roster, csv_path=args.csv,
                        exports=args.export, assignment=args.assignment, similar=similar)
    graded = sum(row.status == "graded" for row in rows)
    print(f"{graded} of {counted(len(rows), 'submission')} graded; wrote {args.csv}",
          file=sys.stderr)


def _merge(args: argparse.Namespace) -> int:
    from ..outputs import exports
    from . import shards

    course = load(args.course)
    try:
        roster = exports.load_for(args.export, args.roster)
        rows = shards.merge(args.json_dir, args.submissions)
    except (OSError, ValueError) as error:  # ShardError and RosterError are ValueErrors
        print(f"error: {error}", file=sys.stderr)
        return 2
    write_class(rows, course, args, roster)
    return 0


def add_merge(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``merge`` command's options."""
    merge = sub.add_parser("merge", parents=[common],
                           help="the class's CSV, report and exports from its shards' results")
    merge.add_argument("json_dir", metavar="JSON_DIR",
                       help="the --json-dir every batch --shard wrote into")
    merge.add_argument("--submissions", required=True, metavar="DIR",
                       help="the folder the shards graded: every student in it gets a row")
    merge.add_argument("--csv", required=True, metavar="FILE", help="write the scores here")
    merge.add_argument("--report", metavar="DIR",
                       help="write the class report here (index.html, summary.json, summary.md)")
    _similarity_option(merge)
    _class_options(merge)
    merge.set_defaults(func=_merge)


def _slurm(args: argparse.Namespace) -> int:
    from . import slurm

    try:
        return slurm.main(args)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def add_slurm(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``slurm`` command's options."""
    cluster = sub.add_parser("slurm", parents=[common],
                             help="write (and --submit) the Slurm jobs that grade DIR in shards")
    cluster.add_argument("dir", help="a folder holding one submission folder per student")
    cluster.add_argument("--shards", type=int, required=True, metavar="N",
                         help="array tasks, each grading 1/N of the folders")
    cluster.add_argument("--out", required=True, metavar="SHARED",
                         help="a folder every node sees: grade.sbatch, merge.sbatch, results/, "
                              "logs/, then grades.csv and report/")
    cluster.add_argument("--partition", metavar="P")
    cluster.add_argument("--time", metavar="T", help="each task's time limit (sbatch --time)")
    cluster.add_argument("--cpus-per-task", type=int, default=2, metavar="C",
                         help="CPUs per task, its --jobs (default 2)")
    cluster.add_argument("--mem", metavar="M", help="memory per task (sbatch --mem)")
    cluster.add_argument("--account", metavar="A", help="sbatch --account, both jobs")
    cluster.add_argument("--qos", metavar="Q", help="sbatch --qos, both jobs")
    cluster.add_argument("--constraint", metavar="C", help="sbatch --constraint, both jobs")
    cluster.add_argument("--throttle", type=int, metavar="N",
                         help="at most N array tasks at once (the array's %%N)")
    cluster.add_argument("--merge-mem", metavar="M", help="memory of the merge job (sbatch --mem)")
    cluster.add_argument("--sbatch-arg", action="append", default=[], metavar="ARG",
                         help="another sbatch option for both jobs, as one word "
                              "(--sbatch-arg=--mail-type=END; repeatable)")
    cluster.add_argument("--submit", action="store_true",
                         help="submit both jobs with sbatch and print their ids")
    limit_options(cluster)
    cluster.add_argument("--no-key", action="store_true", help="ignore solutions/ even if present")
    trust_option(cluster, " (passed on to every task)")
    _class_options(cluster)
    cluster.set_defaults(func=_slurm)


def _report(args: argparse.Namespace) -> int:
    from ..outputs import class_report, exports

    course = load(args.course)
    try:
        roster = exports.load_for(args.export, args.roster)
        rows = class_report.load_rows(args.json_dir, args.csv)
    except (OSError, ValueError) as error:  # RosterError is a ValueError
        print(f"error: {error}", file=sys.stderr)
        return 2
    for folder in (args.submissions, args.similarity_corpus):
        if folder and not Path(folder).is_dir():
            print(f"error: {folder} is not a folder", file=sys.stderr)
            return 2
    if args.similarity_corpus and not args.submissions:
        print("error: --similarity-corpus compares the submissions: give --submissions DIR too",
              file=sys.stderr)
        return 2
    similar = (_similar(course, args.submissions, args.similarity_corpus)
               if args.submissions else None)
    class_report.finish(rows, course, report_dir=args.out, roster=roster,
                        exports=args.export, assignment=args.assignment, similar=similar)
    return 0


def add_report(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``report`` command's options."""
    report = sub.add_parser("report", parents=[common],
                            help="the class report from an earlier batch's --json-dir")
    report.add_argument("json_dir", metavar="JSON_DIR",
                        help="batch --json-dir output (its records, in .records/)")
    report.add_argument("--out", required=True, metavar="DIR",
                        help="write index.html, summary.json and summary.md here")
    report.add_argument("--submissions", metavar="DIR",
                        help="the batch's submission folders: flag similar pairs of files")
    report.add_argument("--similarity-corpus", metavar="DIR",
                        help="compare every student with the outside solutions in DIR too "
                             "(without it: with the answer key in solutions/, where present)")
    report.add_argument("--csv", metavar="FILE",
                        help="read the CSV batch --csv wrote: adds any student it lists who has "
                             "no record in JSON_DIR. report writes no CSV")
    _class_options(report)
    report.set_defaults(func=_report)


def _similar(course: Course, root: str, corpus: str | None, *, no_key: bool = False) -> Any:
    """The similar pairs among the submission folders under ``root``, and with ``corpus``'s
    outside solutions; without a corpus, with the answer key in ``solutions/`` where the kit
    has it (and ``no_key``, batch's ``--no-key``, does not say to leave it alone)."""
    from ...core.course import DEFAULT_KEY
    from ..outputs import inert, similarity
    from . import batch

    folders = {inert.name(p.name): p for p in batch.find_submissions(Path(root), warnings=None)
               if not p.is_symlink()}  # a link leads out of the class: nothing of it is read
    key = None
    if corpus is None and not no_key and all(
            (DEFAULT_KEY / f"{name}.py").is_file() for name in course.names("core")):
        key = DEFAULT_KEY
    return similarity.compare(folders, course, corpus=Path(corpus) if corpus else None, key=key)


def _similarity_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--similarity-corpus", metavar="DIR",
                        help="with --report: compare every student with the known outside "
                             "solutions in DIR too (its folders of exercise files); without it, "
                             "with the answer key in solutions/, where the kit has it")


def _class_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--roster", metavar="FILE",
                        help="CSV with header folder,id,name,email (more columns kept): maps "
                             "submission folders to students")
    parser.add_argument("--export", nargs=2, action="append", metavar=("KIND", "FILE"),
                        help="write a gradebook import: canvas or gradescope (needs --roster; "
                             "repeatable)")
    parser.add_argument("--assignment", default="attention", metavar="TITLE",
                        help="the gradebook's assignment column (default attention; Canvas "
                             "matches 'Title (id)' to an existing assignment)")


def _shard_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shard", metavar="K/N",
                        help="grade only the K-th (from 0) of N slices of DIR's sorted folders, "
                             "into --json-dir; then grader merge (default: from "
                             "SLURM_ARRAY_TASK_ID and _COUNT)")
    parser.add_argument("--shards", type=int, metavar="N",
                        help="N slices, K from SLURM_ARRAY_TASK_ID or Kubernetes' "
                             "JOB_COMPLETION_INDEX")
    trust_option(parser)
