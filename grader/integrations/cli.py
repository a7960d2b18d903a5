"""Command line: ``python -m grader grade PATH [--json FILE]`` and friends.

Every command takes ``--course FILE`` (default: the kit's ``course.toml``).
"""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ..core.course import Course, CourseError, load
from ..core.plural import counted
from ..sandbox.call_limit import CALL_WALL, SHRINK_STOPS
from ..sandbox.isolation import TORCH_CALLS, GiB, Limits

if TYPE_CHECKING:  # imported where used: a command loads only what it needs
    from ..core.course import Course
    from .batch import Row
    from .exports import Roster
    from .shards import Shard


def _limits(args: argparse.Namespace) -> Limits:
    return Limits(timeout=args.timeout, memory=int(args.memory * GiB), call=args.call_timeout)


def _isolation(found: Any, trusted: bool = False) -> str:
    """The lines a report ends with where the workers had less than root's isolation (none
    where they had all of it): what held, and what a worker went without."""
    from ..sandbox import cgroups

    label = found.label(trusted)
    if not label:
        return ""
    lines = [f"Isolation: {label}"]
    if not found.namespaces:
        lines.append("  - files: no namespaces, so the code could read the answer key and "
                     "anything else this user can (grade only code you trust this way)")
    lines += [f"  - {line}" for line in cgroups.missing_limits()]
    return "\n".join(lines)


def _progress() -> Any:
    """A line on stderr as each exercise is graded, for a student watching a terminal (a grade
    takes minutes on a slow machine): its score and the time so far. The report after it is
    the same; where stderr is not a terminal (a log, a test), nothing is printed."""
    from ..core.course import number

    start = time.monotonic()

    def done(result: Any) -> None:
        print(f"graded {result.name}: {number(result.score)} / {number(result.max_score)} "
              f"({time.monotonic() - start:.0f} s)", file=sys.stderr, flush=True)
    return done


def _grade(args: argparse.Namespace) -> int:
    from ..problems import frameworks
    from ..sandbox import isolation, node

    found = node.check()  # before anything else starts: the probe forks

    # Their imports overlap with the engine's; a NumPy exercise alone needs no torch zygote.
    isolation.start_zygote(frameworks(args.exercise) if args.exercise else None)
    from ..core import engine, lanes, replay
    from . import report

    replay.load_cache()  # the examples a previous run drew (grader/core/replay.py)
    lanes.load_seconds()  # how long each exercise took: the longest start first
    try:
        course = load(args.course)
        course.exercises()  # the checks imported, and with them all that grading reads:
        gc.freeze()  # no collection walks it again (nor, in a lane, copies its pages)
        result = engine.grade_submission(
            args.path,
            course=course,
            key_folder=None if args.no_key else engine.DEFAULT_KEY,
            limits=_limits(args),
            exercises=args.exercise or None,
            jobs=args.jobs if args.jobs is not None else lanes.default_lanes(),
            progress=_progress() if sys.stderr.isatty() else None,
        )
    except (engine.BadSubmission, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        if args.json:  # whoever reads the JSON learns why, as Gradescope's student does
            from .gradescope import failure

            with open(args.json, "w") as handle:
                json.dump(failure(f"This submission could not be graded: {error}"), handle,
                          indent=2, sort_keys=True)
                handle.write("\n")
        return 2
    replay.save_cache()
    lanes.save_seconds()
    print(report.render(result, show_output=args.show_output))
    note = _isolation(found)
    if note:
        print(f"\n{note}")
    if args.json:
        report.dump_json(result, args.json)
    return 0


def _batch(args: argparse.Namespace) -> int:
    from ..sandbox import node
    from . import shards

    try:  # before grading: a bad roster, export or shard costs nothing
        shard = shards.choose(args.shard, args.shards)
        _shard_outputs(args, shard)
        from . import exports

        roster = exports.load_for(args.export, args.roster)
    except ValueError as error:  # ShardError, RosterError
        print(f"error: {error}", file=sys.stderr)
        return 2
    found = node.check()  # before anything else starts: the probe forks
    if not _isolated(found, args.trust_submissions):
        return 2
    if args.similarity_corpus and not Path(args.similarity_corpus).is_dir():
        print(f"error: {args.similarity_corpus} is not a folder", file=sys.stderr)
        return 2
    from ..core import engine
    from . import batch

    course = load(args.course)
    paths = batch.find_submissions(Path(args.dir))
    if shard is not None:
        paths = shards.select(paths, shard)
        print(f"{shard} ({shard.source}): {counted(len(paths), 'submission')}",
              file=sys.stderr)
    rows = batch.run(args.dir, jobs=args.jobs, limits=_limits(args), course=course,
                     key_folder=None if args.no_key else engine.DEFAULT_KEY, paths=paths,
                     isolation=found.label(args.trust_submissions),
                     on_row=shards.recorder(args.json_dir, shard) if shard else None)
    if shard is not None:
        print(f"{shard}: {sum(row.status == 'graded' for row in rows)} of {len(rows)} "
              f"graded; wrote their results into {args.json_dir}", file=sys.stderr)
        return 0
    if args.json_dir:
        batch.write_json(rows, args.json_dir)
    write_class(rows, course, args, roster)
    return 0


def _isolated(found: Any, trusted: bool) -> bool:
    """Whether untrusted submissions may be graded here (or ``trusted`` says they are all
    trusted); the refusal, or what the workers will have, on stderr."""
    if not found.isolated and not trusted:
        print("error: this machine cannot isolate one submission from the others and from the "
              f"answer key: {'; '.join(found.missing)}. Grade as root or where the kernel gives "
              "user namespaces, or pass --trust-submissions if every submission is trusted "
              "(each row's status then names the isolation it had)", file=sys.stderr)
        return False
    note = _isolation(found, trusted)
    if note:
        print(note, file=sys.stderr)
    return True


def _shard_outputs(args: argparse.Namespace, shard: Shard | None) -> None:
    """A shard writes results only (``merge`` writes the class's files); a whole batch a CSV."""
    if shard is None:
        if not args.csv:
            raise ValueError("batch needs --csv FILE (or --shard K/N with --json-dir)")
        return
    if not args.json_dir:
        raise ValueError(f"{shard} needs --json-dir DIR: the tasks' results are merged from "
                         "there (python -m grader merge)")
    given = [name for name, value in (("--csv", args.csv), ("--report", args.report),
                                      ("--roster", args.roster), ("--export", args.export))
             if value]
    if given:
        raise ValueError(f"{shard} writes --json-dir only, not {', '.join(given)}: python -m "
                         "grader merge writes the class's files once every shard is done (to "
                         "grade all of DIR here, run without --shard, --shards and "
                         "SLURM_ARRAY_TASK_ID)")


def write_class(rows: list[Row], course: Course, args: argparse.Namespace,
                roster: Roster | None) -> None:
    """The class's files from its rows: the CSV, the roster's, the exports and the report.
    ``batch`` and ``merge`` both end here, so the same rows give the same bytes."""
    from . import batch, class_report

    if roster is None:
        batch.write_csv(rows, args.csv, course)
    folder = getattr(args, "dir", None) or args.submissions  # batch's DIR, merge's
    similar = _similar(course, folder, args.similarity_corpus) if args.report else None
    class_report.finish(rows, course, report_dir=args.report, roster=roster, csv_path=args.csv,
                        exports=args.export, assignment=args.assignment, similar=similar)
    graded = sum(row.status == "graded" for row in rows)
    print(f"{graded} of {counted(len(rows), 'submission')} graded; wrote {args.csv}",
          file=sys.stderr)


def _merge(args: argparse.Namespace) -> int:
    from . import exports, shards

    course = load(args.course)
    try:
        roster = exports.load_for(args.export, args.roster)
        rows = shards.merge(args.json_dir, args.submissions)
    except (OSError, ValueError) as error:  # ShardError and RosterError are ValueErrors
        print(f"error: {error}", file=sys.stderr)
        return 2
    write_class(rows, course, args, roster)
    return 0


def _slurm(args: argparse.Namespace) -> int:
    from . import slurm

    try:
        return slurm.main(args)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _report(args: argparse.Namespace) -> int:
    from . import class_report, exports

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


def _similar(course: Course, root: str, corpus: str | None) -> Any:
    """The similar pairs among the submission folders under ``root`` (and with ``corpus``)."""
    from . import batch, inert, similarity

    folders = {inert.name(p.name): p for p in batch.find_submissions(Path(root), warnings=None)
               if not p.is_symlink()}  # a link leads out of the class: nothing of it is read
    return similarity.compare(folders, course, corpus=Path(corpus) if corpus else None)


def _stubs(args: argparse.Namespace) -> int:
    from . import stubs

    changed = stubs.write_stubs(load(args.course))
    print("\n".join(f"wrote {p}" for p in changed) or "stubs are up to date")
    return 0


def _handout(args: argparse.Namespace) -> int:
    from . import handout

    print(f"wrote {handout.build(Path(args.target), load(args.course))}")
    return 0


def _gradescope(args: argparse.Namespace) -> int:
    from . import gradescope

    if args.action == "build":
        print(f"wrote {gradescope.build(Path(args.target), args.course)}")
        return 0
    return gradescope.run_and_write(Path(args.root))


def _notebook(args: argparse.Namespace) -> int:
    from . import notebook

    if args.action == "files":
        try:
            written = notebook.answer_files(Path(args.notebook), Path(args.folder))
        except (OSError, notebook.NotANotebook) as error:
            print(f"error: {args.notebook}: {error}", file=sys.stderr)
            return 2
        print("\n".join(f"wrote {p}" for p in written))
        return 0
    target = Path(args.target) if args.target else Path("build/nbgrader")
    changed = notebook.build(target, course=load(args.course))
    print("\n".join(f"wrote {p}" for p in changed) or f"{target} is up to date")
    return 0


def _autograde(args: argparse.Namespace) -> int:
    from ..sandbox import node
    from . import nbgrader_autograde as autograde

    found = node.check()  # before anything else starts: the probe forks
    if not _isolated(found, args.trust_submissions):
        return 2
    try:
        subs = autograde.autograde(
            args.course, args.assignment, jobs=args.jobs, limits=_limits(args),
            course=load(args.course_file) if args.course_file else None)
    except autograde.AutogradeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(autograde.summary(subs))
    note = _isolation(found, args.trust_submissions)
    if note:
        print(f"\n{note}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from . import bench

    return bench.main(args.rest)


def _limit_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--timeout", type=float, default=Limits().timeout,
                        help="wall seconds the calls of one exercise may take in all, those "
                             f"stopped at --call-timeout aside (default {Limits().timeout:g}); "
                             "past it the exercise is not graded")
    parser.add_argument("--call-timeout", type=float, default=Limits().call,
                        help="CPU seconds one call of the student's code may take (default "
                             f"{Limits().call:g}; {TORCH_CALLS:g}x that in a torch exercise, "
                             f"{CALL_WALL}x that in wall seconds); past it the call is stopped "
                             "and its check fails, with its input (made smaller by at most "
                             f"{SHRINK_STOPS} more stopped calls per exercise), and the exercise "
                             "goes on in a fresh worker")
    parser.add_argument("--memory", type=float, default=4.0,
                        help="GiB a worker may allocate (default 4)")


def _similarity_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--similarity-corpus", metavar="DIR",
                        help="with --report: compare every student with the known outside "
                             "solutions in DIR too (its folders of exercise files)")


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
                             "into --json-dir; then python -m grader merge (default: from "
                             "SLURM_ARRAY_TASK_ID and _COUNT)")
    parser.add_argument("--shards", type=int, metavar="N",
                        help="N slices, K from SLURM_ARRAY_TASK_ID or Kubernetes' "
                             "JOB_COMPLETION_INDEX")
    _trust_option(parser)


def _trust_option(parser: argparse.ArgumentParser, what: str = "") -> None:
    parser.add_argument("--trust-submissions", action="store_true",
                        help="grade even where this machine gives the workers no namespaces "
                             "(neither root nor user namespaces): a submission could then read "
                             f"the answer key and the other students' files{what}")


DESCRIPTION = """\
Grade attention-kit submissions: one folder (grade), a class (batch, slurm, merge, report),
or through nbgrader and Gradescope. Every command takes --course FILE (default: the kit's
course.toml). Each command's --help shows an example."""

# One example for each command's --help, as a reader would type it (tests/test_cli_help.py
# parses each with the parser itself).
EXAMPLES = {
    "": "python -m grader grade exercises/",
    "grade": "python -m grader grade exercises/ --exercise softmax",
    "batch": "python -m grader batch submissions/ --csv grades.csv --report report/",
    "merge": "python -m grader merge out/results --submissions submissions/ --csv grades.csv",
    "slurm": "python -m grader slurm submissions/ --shards 8 --out /shared/grading --submit",
    "report": "python -m grader report json/ --out report/ --submissions submissions/",
    "stubs": "python -m grader stubs",
    "handout": "python -m grader handout dist/handout",
    "gradescope": "python -m grader gradescope build dist/gradescope-autograder.zip",
    "nbgrader": "python -m grader nbgrader build build/nbgrader",
    "nbgrader build": "python -m grader nbgrader build build/nbgrader",
    "nbgrader files": "python -m grader nbgrader files submitted/ana/attention/attention.ipynb "
                      "ana/",
    "nbgrader autograde": "python -m grader nbgrader autograde --course build/nbgrader --jobs 2",
}


def _with_examples(parser: argparse.ArgumentParser, path: str = "") -> None:
    """Give ``parser`` and each of its subcommands their example (``EXAMPLES``), shown as
    written."""
    if path in EXAMPLES:
        parser.epilog = f"example:\n  {EXAMPLES[path]}"
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                _with_examples(child, f"{path} {name}".strip())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grader", description=DESCRIPTION)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--course", metavar="FILE", default=None,
                        help="the course file (default: the kit's course.toml)")
    sub = parser.add_subparsers(dest="command", required=True)

    grade = sub.add_parser("grade", parents=[common], help="grade one submission folder")
    grade.add_argument("path", help="a folder holding softmax.py, attention.py, ...")
    grade.add_argument("--json", metavar="FILE", help="write Gradescope's results.json here")
    _limit_options(grade)
    grade.add_argument("--exercise", action="append", help="grade only this exercise (repeatable)")
    grade.add_argument("--no-key", action="store_true",
                       help="ignore solutions/ even if present (grade as a student would)")
    grade.add_argument("--show-output", action="store_true",
                       help="show what the submission printed (instructor view)")
    grade.add_argument("--jobs", type=int, default=None,
                       help="exercises graded at once, each in a grading process of its own "
                            "(default: one more than the CPUs, at most 4; the report is the same)")
    grade.set_defaults(func=_grade)

    many = sub.add_parser("batch", parents=[common],
                          help="grade every submission folder under DIR into a CSV")
    many.add_argument("dir", help="a folder holding one submission folder per student")
    many.add_argument("--csv", metavar="FILE",
                      help="write the scores here (needed unless grading a shard)")
    many.add_argument("--json-dir", metavar="DIR",
                      help="also write <student>.json per student (instructor view)")
    many.add_argument("--jobs", type=int, default=None,
                      help="submissions graded at once (default: the number of CPUs)")
    _limit_options(many)
    many.add_argument("--no-key", action="store_true", help="ignore solutions/ even if present")
    many.add_argument("--report", metavar="DIR",
                      help="write the class report here (index.html, summary.json, summary.md)")
    _similarity_option(many)
    _class_options(many)
    _shard_options(many)
    many.set_defaults(func=_batch)

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
    _limit_options(cluster)
    cluster.add_argument("--no-key", action="store_true", help="ignore solutions/ even if present")
    _trust_option(cluster, " (passed on to every task)")
    _class_options(cluster)
    cluster.set_defaults(func=_slurm)

    report = sub.add_parser("report", parents=[common],
                            help="the class report from an earlier batch's --json-dir")
    report.add_argument("json_dir", metavar="JSON_DIR", help="batch --json-dir output")
    report.add_argument("--out", required=True, metavar="DIR",
                        help="write index.html, summary.json and summary.md here")
    report.add_argument("--submissions", metavar="DIR",
                        help="the batch's submission folders: flag similar pairs of files")
    report.add_argument("--similarity-corpus", metavar="DIR",
                        help="compare every student with the outside solutions in DIR too")
    report.add_argument("--csv", metavar="FILE",
                        help="read the CSV batch --csv wrote: adds its students without a JSON "
                             "(not graded). report writes no CSV")
    _class_options(report)
    report.set_defaults(func=_report)

    stubs = sub.add_parser("stubs", parents=[common], help="regenerate exercises/ from solutions/")
    stubs.set_defaults(func=_stubs)

    handout = sub.add_parser("handout", parents=[common],
                             help="write the student's copy of the kit (default dist/handout)")
    handout.add_argument("target", nargs="?", default="dist/handout")
    handout.set_defaults(func=_handout)

    gradescope = sub.add_parser("gradescope", parents=[common],
                                help="build the Gradescope bundle, or run inside it")
    gradescope.add_argument("action", choices=("build", "run"))
    gradescope.add_argument("target", nargs="?", default="dist/gradescope-autograder.zip",
                            help="build: the zip to write")
    gradescope.add_argument("--root", default="/autograder", help="run: Gradescope's root")
    gradescope.set_defaults(func=_gradescope)

    notebook = sub.add_parser("nbgrader", help="the nbgrader course: build, files, autograde")
    steps = notebook.add_subparsers(dest="action", required=True)
    build = steps.add_parser("build", parents=[common],
                             help="write the course folder (default build/nbgrader)")
    build.add_argument("target", nargs="?")
    build.set_defaults(func=_notebook)
    files = steps.add_parser("files", help="a notebook's answer cells as exercise files")
    files.add_argument("notebook")
    files.add_argument("folder")
    files.set_defaults(func=_notebook)
    auto = steps.add_parser(
        "autograde", help="grade every submitted notebook in isolation, into the gradebook")
    auto.add_argument("--course", required=True, metavar="PATH",
                      help="the nbgrader course folder (holds nbgrader_config.py, submitted/)")
    auto.add_argument("--assignment", default="attention", help="default: attention")
    auto.add_argument("--jobs", type=int, default=None,
                      help="notebooks graded at once (default: the number of CPUs)")
    auto.add_argument("--course-file", metavar="FILE", default=None,
                      help="the rubric (default: the one the notebook was built with)")
    _limit_options(auto)
    _trust_option(auto)
    auto.set_defaults(func=_autograde)

    bench = sub.add_parser("bench", help="the benchmarks (make bench)", add_help=False)
    bench.add_argument("rest", nargs=argparse.REMAINDER)
    bench.set_defaults(func=_bench)
    _with_examples(parser)
    return parser


def leave(code: int) -> NoReturn:
    """End the process with ``code``, without the interpreter's teardown: freeing torch's
    objects one by one takes longer than half a second (``python -c "import torch"`` spends
    0.7 s of its 2.9 s after the import), and nothing in it matters here. What does matter runs
    first: the exit handlers (the workers and zygotes closed, temporary folders removed) and the
    buffered output. With a thread still running, the ordinary exit, which waits for it."""
    if threading.active_count() > 1:
        raise SystemExit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 1
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if args.command == "bench":  # its options are bench.main's own (argparse's REMAINDER
        args.rest = unknown + args.rest  # lets options through only after a positional)
    elif unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return int(args.func(args))
    except CourseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
