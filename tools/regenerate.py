"""``make regenerate``: every file the kit derives from what an author writes by hand (the
answer key, the exercise modules, the zoo's entries and ``course.toml``), written again.

1. The stubs, ``exercises/`` (as ``make stubs``).
2. The docs' generated parts, in the README and ``docs/*.md``: each span
   ``<!-- course: KEY -->...<!-- /course -->`` holds ``spans()[KEY]`` (capitalised when KEY
   starts with a capital), and each block ``<!-- report: ENTRY EXERCISE [TRIM] -->`` the report
   of that zoo entry graded on that exercise, as ``python -m grader grade`` prints it, less its
   first line (``Grading <folder>``). TRIM keeps part of it: ``checks=N`` the report down to
   the end of its Nth check, ``check=NAME`` that check's lines alone.
3. The golden outputs, ``tests/golden/`` (``tests/golden.py``): the zoo's, for every entry or,
   with ``--exercise NAME``, for the entries graded with that exercise (its own, and every
   core entry when it is a core exercise); and the golden class's.

``--check`` writes nothing: it lists what is stale (the golden outputs aside: ``test_golden``
compares them) and exits 1 if anything is. The notebooks, the handout and the Gradescope
bundle are not checked in: they are built from the same sources when asked for.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
TESTS = KIT / "tests"
DOCS = [KIT / "README.md", *sorted((KIT / "docs").glob("*.md"))]
SPAN = re.compile(r"<!-- course: (?P<key>[\w-]+) -->(?P<text>.*?)<!-- /course -->", re.S)
BLOCK = re.compile(r"<!-- report: (?P<entry>\w+) (?P<exercise>\w+)(?: (?P<trim>checks=\d+|"
                   r"check=\w+))? -->\n```\n(?P<text>.*?)```\n", re.S)
WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
         "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen")

os.environ.setdefault("ATTENTION_KIT_SECRET", "")  # as the kit's tests grade (tests/conftest.py)
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))  # the zoo (tests/zoo/) and the golden outputs' writer


# -- the spans: counts, tables and lists from the course and the zoo -----------------------------
def spans() -> dict[str, str]:
    """What each span says, from the kit's course (``course.toml``), its answer key and its
    zoo."""
    from zoo.catalog import CORRECT, NAMED, WRONG

    from grader.core.course import load, number
    from grader.integrations.routes.notebook import topics

    course = load(KIT / "course.toml")

    def word(count: int) -> str:
        return WORDS[count] if count < len(WORDS) else str(count)

    def table(track: str) -> str:
        head = ["exercise", "file", "what you write"] + (["points"] if track == "core" else [])
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for e in course.exercises(track):
            cells = [f"`{e.name}`", f"`{e.filename}`", e.title]
            cells += [f"{number(course.points(e.name)):g}"] if track == "core" else []
            lines.append("| " + " | ".join(cells) + " |")
        return "\n" + "\n".join(lines) + "\n"

    return {"core-count": word(len(course.names("core"))),
            "bonus-count": word(len(course.names("bonus"))),
            "core-points": f"{number(course.total('core')):g}",
            "bonus-points": f"{number(course.total('bonus')):g}",
            "core-table": table("core"), "bonus-table": table("bonus"),
            "bonus-topics": "; ".join(topics(course, "bonus", KIT / "solutions")),
            "zoo-summary": f"`caught {len(WRONG)}/{len(WRONG)} wrong, diagnosed "
                           f"{len(NAMED)}/{len(NAMED)} named, correct {len(CORRECT)}/"
                           f"{len(CORRECT)} full marks`"}


def span_text(key: str, generated: dict[str, str]) -> str:
    text = generated[key.lower()]
    return text[:1].upper() + text[1:] if key[:1].isupper() else text


# -- the report examples -------------------------------------------------------------------------
def real_report(entry: str, exercise: str) -> str:
    """The terminal report of the zoo entry graded on ``exercise``, without its first line
    (``Grading <temporary folder>``)."""
    from zoo.catalog import BY_NAME, build

    from grader.core.engine import grade_submission
    from grader.integrations.outputs import report

    if entry not in BY_NAME:
        raise ValueError(f"<!-- report: {entry} {exercise} -->: no zoo entry {entry}")
    with tempfile.TemporaryDirectory() as tmp:
        result = grade_submission(build(BY_NAME[entry], Path(tmp)), exercises=[exercise])
        return report.render(result).split("\n", 2)[2] + "\n"


def _check_end(lines: list[str], start: int) -> int:
    """The line after the check whose ``-- NAME (points)`` line is ``start``: its lines are
    the indented ones under it."""
    end = start + 1
    while end < len(lines) and lines[end].startswith("   "):
        end += 1
    return end


def trim(report: str, how: str | None) -> str:
    """``report``, or the part of it ``how`` names: ``checks=N`` down to the end of its Nth
    check, ``check=NAME`` that check alone (ValueError if the report has no such check)."""
    if how is None:
        return report
    lines = report.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("-- ")]
    kind, value = how.split("=", 1)
    if kind == "checks":
        if not 1 <= int(value) <= len(starts):
            raise ValueError(f"{how}: the report has {len(starts)} checks")
        kept = lines[:_check_end(lines, starts[int(value) - 1])]
    else:
        found = [i for i in starts if lines[i].split()[1] == value]
        if not found:
            raise ValueError(f"{how}: the report shows no check {value}")
        kept = lines[found[0]:_check_end(lines, found[0])]
    return "\n".join(kept) + "\n"


def report_block(match: re.Match) -> str:
    """What a ``<!-- report: ... -->`` block holds, marker and fences included."""
    marker = match.group(0).split("\n", 1)[0]
    text = trim(real_report(match["entry"], match["exercise"]), match["trim"])
    return f"{marker}\n```\n{text}```\n"


# -- the docs, written or checked ----------------------------------------------------------------
def fresh_doc(text: str, generated: dict[str, str]) -> str:
    """A doc's text with its spans and report blocks as the kit makes them now."""
    text = SPAN.sub(lambda s: f"<!-- course: {s['key']} -->{span_text(s['key'], generated)}"
                              "<!-- /course -->", text)
    return BLOCK.sub(report_block, text)


def stale_docs() -> list[Path]:
    generated = spans()
    return [path for path in DOCS if fresh_doc(path.read_text(), generated) != path.read_text()]


def write_docs() -> list[Path]:
    generated = spans()
    changed = []
    for path in DOCS:
        text = path.read_text()
        fresh = fresh_doc(text, generated)
        if fresh != text:
            path.write_text(fresh)
            changed.append(path)
    return changed


# -- the command -----------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.regenerate",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--exercise", action="append", default=[], metavar="NAME",
                        help="regrade only the zoo entries graded with this exercise for the "
                             "golden outputs (repeatable; the golden class always)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; list the stale stubs and docs (exit 1 if any)")
    args = parser.parse_args(argv)

    from grader.core.course import load
    from grader.integrations.routes import stubs

    course = load(KIT / "course.toml")
    unknown = sorted(set(args.exercise) - set(course.names()))
    if unknown:
        parser.error(f"unknown exercise {', '.join(unknown)}: one of {', '.join(course.names())}")
    if args.check:
        stale = [KIT / "exercises" / name for name, text in stubs.stub_sources(course=course)
                 .items() if not (KIT / "exercises" / name).is_file()
                 or (KIT / "exercises" / name).read_text() != text] + stale_docs()
        print("\n".join(f"stale: {p.relative_to(KIT)}" for p in stale) or "up to date")
        return 1 if stale else 0
    import golden

    try:
        written = [w.path for w in stubs.write_stubs(course)]
    except stubs.ChangedStubs as error:  # someone's work in exercises/: never overwritten
        print(f"make regenerate: {error}", file=sys.stderr)
        return 1
    for path in written + write_docs():
        print(f"wrote {path.relative_to(KIT)}")
    written = golden.write(args.exercise or None)
    print(f"wrote {written} golden files under tests/golden/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
