"""Points that add up: wherever a total leaves out the hidden checks (no answer key there), one
line under it says how many points they are worth.

On 4e1a685 a handout that got everything right read ``bonus total  54 / 54`` with nothing
under it, where the course gave the bonus 60; the notebook headed softmax ``(15 points)`` and
its test cell ``(of 14)``, and the cell printed ``softmax: 14 / 14``; the handout's README said
only that "the report says how many points those are worth".
"""

from __future__ import annotations

import re

import pytest
from submission_tools import COURSE, EXERCISES, SOLUTIONS

from grader.core import engine
from grader.integrations.outputs import report
from grader.integrations.routes import handout, kernel, notebook


def hidden(name: str) -> float:
    points = COURSE.check_points(EXERCISES[name])
    return sum(points[c.name] for c in EXERCISES[name].checks if c.hidden)


@pytest.fixture(scope="module")
def without_key() -> engine.SubmissionResult:
    """softmax and masks right, graded as a handout grades them (no answer key)."""
    return engine.grade_submission(SOLUTIONS, exercises=["softmax", "masks"], key_folder=None)


def test_grades_report_says_what_each_total_leaves_out(without_key):
    text = report.render(without_key)
    assert without_key.hidden_points_skipped == hidden("softmax") == 1
    assert without_key.hidden_bonus_points_skipped == hidden("masks") == 1
    assert re.search(r"^total +14 / 14$", text, re.M)
    assert ("(No answer key here: graded on the public property and torch checks. 1 more "
            "point comes from hidden checks your instructor runs.)") in text
    assert re.search(r"^bonus total +9 / 9\n\n\(1 more bonus point comes from hidden checks "
                     r"your instructor runs\.\)$", text, re.M), text
    assert report.summary(without_key).endswith(  # the table pytest ends with
        "(1 more bonus point comes from hidden checks your instructor runs.)")


def test_with_the_key_no_line_is_needed():
    result = engine.grade_submission(SOLUTIONS, exercises=["masks"])
    assert result.hidden_bonus_points_skipped == 0
    assert "more bonus point" not in report.render(result)


def test_the_handout_readme_gives_the_numbers():
    text = handout.readme(COURSE).replace("\n", " ")
    core = sum(hidden(n) for n in COURSE.names("core"))
    bonus = sum(hidden(n) for n in COURSE.names("bonus"))
    assert core > 0 and bonus > 0
    total, bonus_total = COURSE.total(), COURSE.total("bonus")
    assert (f"`make grade` and `pytest` count the public checks: {total - core:g} of the "
            f"{total:g} points (and {bonus_total - bonus:g} of the bonus track's {bonus_total:g});"
            f" the hidden checks are worth the other {core:g} (and {bonus:g})") in text


def test_the_notebook_says_what_each_total_leaves_out():
    def counts(track: str) -> str:
        total, hidden_total = COURSE.total(track), sum(hidden(n) for n in COURSE.names(track))
        return (f"{len(COURSE.names(track))} exercises, {total:g} points ({total - hidden_total:g}"
                f" from the test cells you can run, {hidden_total:g} from hidden tests run when "
                "your notebook is graded)")

    core = COURSE.names("core")
    cells = {c["id"]: "".join(c["source"]) for c in notebook.notebook()["cells"]}
    assert cells["title"].startswith(
        f"# Multi-head attention, from `{core[0]}` to `{core[-1]}`\n\n{counts('core')}: ")
    assert cells["softmax-intro"].startswith("## 1. `softmax` (15 points, 1 of them from "
                                             "hidden checks)")
    assert cells["softmax-tests"].startswith(
        "# Grades the properties listed above; the number it shows is its points (of 14; the "
        "other 1 comes from the hidden tests below, run when the notebook is graded).")
    bonus = {c["id"]: "".join(c["source"]) for c in notebook.notebook(track="bonus")["cells"]}
    assert counts("bonus") in bonus["title"]


def test_a_test_cell_without_the_key_says_what_is_hidden(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv(kernel.KEY_ENV, str(tmp_path / "no-key"))  # a student's kernel
    body = (SOLUTIONS / "softmax.py").read_text()
    kernel.run_exercise_cell("softmax", body, {})
    assert kernel.score("softmax") == 14
    assert capsys.readouterr().out.startswith(
        "softmax: 14 / 14\n(1 more point comes from the hidden tests, run when your notebook "
        "is graded.)\n")
