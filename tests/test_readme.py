"""The README's report examples are the real report: each block marked
``<!-- report: ZOO_ENTRY EXERCISE -->`` is a run of lines, exactly as ``python -m grader grade``
prints them, for that zoo entry graded on that exercise.

``python tests/test_readme.py`` rewrites the marked blocks from the real report (the whole
report but its first line; trim a block by hand afterwards, keeping whole lines in order).
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest  # noqa: E402
from zoo.catalog import BY_NAME, build  # noqa: E402

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"<!-- report: (?P<entry>\w+) (?P<exercise>\w+) -->\n```\n(?P<text>.*?)```\n",
                   re.S)


def real_report(entry: str, exercise: str) -> str:
    """The terminal report for the zoo entry graded on ``exercise``, without its first line
    (``Grading <temporary folder>``)."""
    from grader.core.engine import grade_submission
    from grader.integrations import report

    with tempfile.TemporaryDirectory() as tmp:
        result = grade_submission(build(BY_NAME[entry], Path(tmp)), exercises=[exercise])
        return report.render(result).split("\n", 2)[2] + "\n"


def blocks() -> list[re.Match]:
    return list(BLOCK.finditer(README.read_text()))


def test_the_readme_has_report_examples():
    assert len(blocks()) >= 2


@pytest.mark.parametrize("block", blocks(), ids=lambda b: b["entry"])
def test_each_report_example_is_lines_of_the_real_report(block):
    lines = block["text"].splitlines()
    report = real_report(block["entry"], block["exercise"]).splitlines()
    starts = [i for i, line in enumerate(report) if line == lines[0]]
    assert any(report[i:i + len(lines)] == lines for i in starts), "\n".join(report)


def rewrite() -> None:
    text = README.read_text()
    for block in reversed(blocks()):
        fresh = real_report(block["entry"], block["exercise"])
        head = f"<!-- report: {block['entry']} {block['exercise']} -->\n```\n"
        text = text[:block.start()] + head + fresh + "```\n" + text[block.end():]
    README.write_text(text)


if __name__ == "__main__":
    rewrite()
