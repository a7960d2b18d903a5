"""Command line: ``grader grade PATH [--json FILE]`` and friends (``.venv/bin/grader``, the
console script ``pyproject.toml`` declares; ``python -m grader`` is the same). Each command's
options are beside its handler (``_add_grade`` after ``_grade``); the class's commands (batch,
merge, slurm, report) are in ``class_commands``, what they share in ``cli_common``.

Every command takes ``--course FILE`` (default: the kit's ``course.toml``).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

from ...core.course import CourseError, load
from . import class_commands
from .cli_common import isolated, isolation_note, limit_options, limits_of, trust_option


def _progress() -> Any:
    """A line on stderr as each exercise is graded, for a student watching a terminal (a grade
    takes minutes on a slow machine): its score and the time so far. The report after it is
    the same; where stderr is not a terminal (a log, a test), nothing is printed."""
    from ...core.course import number

    start = time.monotonic()

    def done(result: Any) -> None:
        print(f"graded {result.name}: {number(result.score)} / {number(result.max_score)} "
              f"({time.monotonic() - start:.0f} s)", file=sys.stderr, flush=True)
    return done


def _visible_json(path: str | None) -> Any:
    """``--json``'s first writing: the visible part, before any hidden check runs (each hidden
    test reads that it has not run yet); the whole replaces it at the end."""
    if not path:
        return None
    from ..outputs import report

    return lambda part: report.dump_json(part, path)


def _grade(args: argparse.Namespace) -> int:
    from ...core.course import DEFAULT_KEY
    from ...core.run import GradingRun
    from ...core.submission import BadSubmission
    from ...sandbox import node

    found = node.check()  # before anything else starts: the probe forks
    run = GradingRun(args.course, None if args.no_key else DEFAULT_KEY, limits_of(args),
                     args.jobs)
    from ..outputs import report

    # In a terminal the report's heading comes first, then a line as each exercise is graded
    # (on stderr), then the rest of the report: stdout is the same as a pipe's.
    progress = _progress() if sys.stderr.isatty() else None
    if progress:
        print(report.heading(str(Path(args.path))), flush=True)
    try:
        # The zygotes start first (their imports overlap with the engine's; a NumPy exercise
        # alone needs no torch zygote), then the course is loaded and its checks imported.
        run.start(args.exercise, caches=True)
        result = run.grade(args.path, exercises=args.exercise or None, progress=progress,
                           visible=_visible_json(args.json))
    except (BadSubmission, ValueError) as error:  # CourseError is a ValueError
        print(f"error: {error}", file=sys.stderr)
        if args.json:  # whoever reads the JSON learns why, as Gradescope's student does
            from ..outputs.report import failure

            with open(args.json, "w") as handle:
                json.dump(failure(f"This submission could not be graded: {error}"), handle,
                          indent=2, sort_keys=True)
                handle.write("\n")
        return 2
    run.close()
    print(report.render(result, show_output=args.show_output, titled=not progress))
    # What the workers' isolation went without is the instructor's concern: `batch`, nbgrader
    # autograde and the instructor's part of the JSON (--json, Gradescope's results) say it;
    # `grade` prints it when asked (-v).
    note = isolation_note(found) if args.verbose else ""
    if note:
        print(f"\n{note}")
    if args.json:
        report.dump_json(result, args.json)
    return 0


def _add_grade(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``grade`` command's options."""
    grade = sub.add_parser("grade", parents=[common], help="grade one submission folder")
    grade.add_argument("path", help="a folder holding softmax.py, attention.py, ...")
    grade.add_argument("--json", metavar="FILE", help="write Gradescope's results.json here")
    limit_options(grade)
    grade.add_argument("--exercise", action="append", help="grade only this exercise (repeatable)")
    grade.add_argument("--no-key", action="store_true",
                       help="ignore solutions/ even if present (grade as a student would)")
    grade.add_argument("--show-output", action="store_true",
                       help="show what the submission printed (instructor view)")
    grade.add_argument("-v", "--verbose", action="store_true",
                       help="end the report with what the workers' isolation went without "
                            "where this machine gives less than root's (instructor view)")
    grade.add_argument("--jobs", type=int, default=None,
                       help="exercises graded at once, each in a grading process of its own "
                            "(default: one more than the CPUs, at most 4; the report is the same)")
    grade.set_defaults(func=_grade)


def _stubs(args: argparse.Namespace) -> int:
    from . import stubs

    try:
        written = stubs.write_stubs(load(args.course), force=args.force)
    except stubs.ChangedStubs as changed:
        print(f"error: {changed}", file=sys.stderr)
        return 1
    lines = [f"wrote {stubs.shown(w.path)}"
             + (f" (the file it replaced is kept as {stubs.shown(w.kept)})" if w.kept else "")
             for w in written]
    print("\n".join(lines) or "stubs are up to date")
    return 0


def _add_stubs(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``stubs`` command's options."""
    stubs = sub.add_parser("stubs", parents=[common], help="regenerate exercises/ from solutions/")
    stubs.add_argument("--force", action="store_true",
                       help="also replace a file that differs from the stub the kit last "
                            "wrote (someone's work): it is kept beside it as NAME.py.orig")
    stubs.set_defaults(func=_stubs)


def _handout(args: argparse.Namespace) -> int:
    from . import handout

    if args.check:
        import tempfile

        from . import handout_check

        with tempfile.TemporaryDirectory(prefix="attention-kit-handout-") as tmp:
            shared = handout_check.shared_lines(handout.build(Path(tmp) / "handout",
                                                              load(args.course)))
        for line in shared:
            print(line)
        print(f"{len(shared)} shipped {'line repeats' if len(shared) == 1 else 'lines repeat'} "
              "a line of the answer key" if shared else
              "the handout shares no line of three or more words with the answer key")
        return 1 if shared else 0
    try:
        print(f"wrote {handout.build(Path(args.target), load(args.course), force=args.force)}")
    except handout.HandoutError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


def _add_handout(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``handout`` command's options."""
    handout = sub.add_parser("handout", parents=[common],
                             help="write the student's copy of the kit (default dist/handout)")
    handout.add_argument("target", nargs="?", default="dist/handout")
    handout.add_argument("--check", action="store_true",
                         help="write nothing: print each line the handout would ship that "
                              "repeats a line of the answer key's solutions, with its file and "
                              "line (exit 1 if any)")
    handout.add_argument("--force", action="store_true",
                         help="also replace a file that is not as the kit last wrote it there "
                              "(someone's); the folder's other files are kept either way")
    handout.set_defaults(func=_handout)


def _gradescope(args: argparse.Namespace) -> int:
    from . import gradescope

    if args.action == "build":
        print(f"wrote {gradescope.build(Path(args.target), args.course)}")
        return 0
    return gradescope.run_and_write(Path(args.root))


def _add_gradescope(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``gradescope`` command's options."""
    gradescope = sub.add_parser("gradescope", parents=[common],
                                help="build the Gradescope bundle, or run inside it")
    gradescope.add_argument("action", choices=("build", "run"))
    gradescope.add_argument("target", nargs="?", default="dist/gradescope-autograder.zip",
                            help="build: the zip to write")
    gradescope.add_argument("--root", default="/autograder", help="run: Gradescope's root")
    gradescope.set_defaults(func=_gradescope)


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
    changed = notebook.build(target, course=load(args.course), exchange=args.exchange)
    print("\n".join(f"wrote {p}" for p in changed) or f"{target} is up to date")
    return 0


def _autograde(args: argparse.Namespace) -> int:
    from ...sandbox import node
    from . import nbgrader_autograde as autograde

    found = node.check()  # before anything else starts: the probe forks
    if not isolated(found, args.trust_submissions):
        return 2
    try:
        subs = autograde.autograde(
            args.course, args.assignment, jobs=args.jobs, limits=limits_of(args),
            course=load(args.course_file) if args.course_file else None)
    except autograde.AutogradeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(autograde.summary(subs))
    note = isolation_note(found, args.trust_submissions)
    if note:
        print(f"\n{note}")
    return 0


def _add_nbgrader(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``nbgrader`` command's options."""
    notebook = sub.add_parser("nbgrader", help="the nbgrader course: build, files, autograde")
    steps = notebook.add_subparsers(dest="action", required=True)
    build = steps.add_parser("build", parents=[common],
                             help="write the course folder (default build/nbgrader)")
    build.add_argument("target", nargs="?")
    build.add_argument("--exchange", metavar="DIR", default=None,
                       help="the nbgrader exchange its config names (default: exchange/ in the "
                            "course folder, which needs no root)")
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
    limit_options(auto)
    trust_option(auto)
    auto.set_defaults(func=_autograde)


DESCRIPTION = """\
Grade attention-kit submissions: one folder (grade), a class (batch, slurm, merge, report),
or through nbgrader and Gradescope. Every command takes --course FILE (default: the kit's
course.toml). Each command's --help shows an example."""

# One example for each command's --help, as a reader would type it in the kit's folder
# (tests/test_cli_help.py parses each with the parser itself).
EXAMPLES = {
    "": ".venv/bin/grader grade exercises/",
    "grade": ".venv/bin/grader grade exercises/ --exercise softmax",
    "batch": ".venv/bin/grader batch submissions/ --csv grades.csv --report report/",
    "merge": ".venv/bin/grader merge out/results --submissions submissions/ --csv grades.csv",
    "slurm": ".venv/bin/grader slurm submissions/ --shards 8 --out /shared/grading --submit",
    "report": ".venv/bin/grader report json/ --out report/ --submissions submissions/",
    "stubs": ".venv/bin/grader stubs",
    "handout": ".venv/bin/grader handout dist/handout",
    "gradescope": ".venv/bin/grader gradescope build dist/gradescope-autograder.zip",
    "nbgrader": ".venv/bin/grader nbgrader build build/nbgrader",
    "nbgrader build": ".venv/bin/grader nbgrader build build/nbgrader",
    "nbgrader files": ".venv/bin/grader nbgrader files submitted/ana/attention/attention.ipynb "
                      "ana/",
    "nbgrader autograde": ".venv/bin/grader nbgrader autograde --course build/nbgrader --jobs 2",
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
    parser = argparse.ArgumentParser(prog="grader", description=DESCRIPTION)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--course", metavar="FILE", default=None,
                        help="the course file (default: the kit's course.toml)")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_grade, class_commands.add_batch, class_commands.add_merge,
                class_commands.add_slurm, class_commands.add_report, _add_stubs, _add_handout,
                _add_gradescope, _add_nbgrader):
        add(sub, common)
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


def run() -> NoReturn:
    """The ``grader`` console script (``.venv/bin/grader``), as ``python -m grader``."""
    leave(main())


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except CourseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
