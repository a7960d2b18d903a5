"""Command line: ``python -m grader grade PATH [--json FILE]`` and friends."""

from __future__ import annotations

import argparse
import sys

from .isolation import GiB, Limits


def _grade(args: argparse.Namespace) -> int:
    from . import engine, report

    limits = Limits(timeout=args.timeout, memory=int(args.memory * GiB))
    try:
        result = engine.grade_submission(
            args.path,
            key_folder=None if args.no_key else engine.DEFAULT_KEY,
            limits=limits,
            exercises=args.exercise or None,
        )
    except engine.BadSubmission as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(report.render(result, show_output=args.show_output))
    if args.json:
        report.dump_json(result, args.json)
    return 0


def _batch(args: argparse.Namespace) -> int:
    from . import batch, engine

    limits = Limits(timeout=args.timeout, memory=int(args.memory * GiB))
    rows = batch.run(args.dir, jobs=args.jobs, limits=limits,
                     key_folder=None if args.no_key else engine.DEFAULT_KEY)
    batch.write_csv(rows, args.csv)
    if args.json_dir:
        batch.write_json(rows, args.json_dir)
    graded = sum(row.status == "graded" for row in rows)
    print(f"{graded} of {len(rows)} submissions graded; wrote {args.csv}", file=sys.stderr)
    return 0


def _stubs(args: argparse.Namespace) -> int:
    from . import stubs

    changed = stubs.write_stubs()
    print("\n".join(f"wrote {p}" for p in changed) or "stubs are up to date")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    grade = sub.add_parser("grade", help="grade one submission folder")
    grade.add_argument("path", help="a folder holding softmax.py, attention.py, ...")
    grade.add_argument("--json", metavar="FILE", help="write Gradescope's results.json here")
    grade.add_argument("--timeout", type=float, default=60.0,
                       help="wall seconds per exercise (default 60)")
    grade.add_argument("--memory", type=float, default=4.0,
                       help="GiB a worker may allocate (default 4)")
    grade.add_argument("--exercise", action="append", help="grade only this exercise (repeatable)")
    grade.add_argument("--no-key", action="store_true",
                       help="ignore solutions/ even if present (grade as a student would)")
    grade.add_argument("--show-output", action="store_true",
                       help="show what the submission printed (instructor view)")
    grade.set_defaults(func=_grade)
    many = sub.add_parser("batch", help="grade every submission folder under DIR into a CSV")
    many.add_argument("dir", help="a folder holding one submission folder per student")
    many.add_argument("--csv", required=True, metavar="FILE", help="write the scores here")
    many.add_argument("--json-dir", metavar="DIR",
                      help="also write <student>.json per student (instructor view)")
    many.add_argument("--jobs", type=int, default=None,
                      help="submissions graded at once (default: the number of CPUs)")
    many.add_argument("--timeout", type=float, default=60.0,
                      help="wall seconds per exercise (default 60)")
    many.add_argument("--memory", type=float, default=4.0,
                      help="GiB a worker may allocate (default 4)")
    many.add_argument("--no-key", action="store_true", help="ignore solutions/ even if present")
    many.set_defaults(func=_batch)
    stubs = sub.add_parser("stubs", help="regenerate exercises/ from solutions/")
    stubs.set_defaults(func=_stubs)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))
