"""The report examples in the README and docs/*.md are the real report: each block marked
``<!-- report: ZOO_ENTRY EXERCISE -->`` is a run of lines, exactly as ``python -m grader grade``
prints them, for that zoo entry graded on that exercise. And its counts and tables are the
course's: each span ``<!-- course: KEY -->...<!-- /course -->`` holds ``generated()[KEY]``
(a key starting with a capital: the same, capitalised), so adding an exercise cannot leave
"six optional exercises" or "60 points" behind.

``python tests/test_readme.py`` rewrites, in every one of those files, the marked blocks from
the real report (the whole report but its first line; trim a block by hand afterwards, keeping
whole lines in order) and
the spans from the course.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest  # noqa: E402
from zoo.catalog import BY_NAME, build  # noqa: E402

KIT = Path(__file__).resolve().parent.parent
README = KIT / "README.md"
DOCS = [README, *sorted((KIT / "docs").glob("*.md"))]  # every file the spans and blocks may be in
BLOCK = re.compile(r"<!-- report: (?P<entry>\w+) (?P<exercise>\w+) -->\n```\n(?P<text>.*?)```\n",
                   re.S)


SPAN = re.compile(r"<!-- course: (?P<key>[\w-]+) -->(?P<text>.*?)<!-- /course -->", re.S)
WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
         "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen")


def generated() -> dict[str, str]:
    """What each span says, from the kit's course and its zoo."""
    from zoo.catalog import CORRECT, NAMED, WRONG

    from grader.core.course import load, number

    course = load(README.parent / "course.toml")

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
            "zoo-summary": f"`caught {len(WRONG)}/{len(WRONG)} wrong, diagnosed "
                           f"{len(NAMED)}/{len(NAMED)} named, correct {len(CORRECT)}/"
                           f"{len(CORRECT)} full marks`"}


def span_text(key: str) -> str:
    text = generated()[key.lower()]
    return text[:1].upper() + text[1:] if key[:1].isupper() else text


def test_the_docs_counts_and_tables_are_the_courses():
    spans = [span for path in DOCS for span in SPAN.finditer(path.read_text())]
    assert {s["key"].lower() for s in spans} == set(generated())
    for span in spans:
        assert span["text"] == span_text(span["key"]), span["key"]


def real_report(entry: str, exercise: str) -> str:
    """The terminal report for the zoo entry graded on ``exercise``, without its first line
    (``Grading <temporary folder>``)."""
    from grader.core.engine import grade_submission
    from grader.integrations.outputs import report

    with tempfile.TemporaryDirectory() as tmp:
        result = grade_submission(build(BY_NAME[entry], Path(tmp)), exercises=[exercise])
        return report.render(result).split("\n", 2)[2] + "\n"


def blocks() -> list[re.Match]:
    return [block for path in DOCS for block in BLOCK.finditer(path.read_text())]


def test_the_docs_have_report_examples():
    assert len(blocks()) >= 2


@pytest.mark.parametrize("block", blocks(), ids=lambda b: b["entry"])
def test_each_report_example_is_lines_of_the_real_report(block):
    lines = block["text"].splitlines()
    report = real_report(block["entry"], block["exercise"]).splitlines()
    starts = [i for i, line in enumerate(report) if line == lines[0]]
    assert any(report[i:i + len(lines)] == lines for i in starts), "\n".join(report)


def rewrite() -> None:
    for path in DOCS:
        text = SPAN.sub(
            lambda s: f"<!-- course: {s['key']} -->{span_text(s['key'])}<!-- /course -->",
            path.read_text())
        for block in reversed(list(BLOCK.finditer(text))):
            fresh = real_report(block["entry"], block["exercise"])
            head = f"<!-- report: {block['entry']} {block['exercise']} -->\n```\n"
            text = text[:block.start()] + head + fresh + "```\n" + text[block.end():]
        path.write_text(text)


if __name__ == "__main__":
    rewrite()
