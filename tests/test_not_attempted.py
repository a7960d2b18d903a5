"""An untouched stub is not attempted: a student who skips the bonus, leaving its stubs in the
folder as the handout ships them, fails no test for it, and the class's pass rates count the
students who attempted each exercise.

On 4e1a685 a finished core beside the six untouched bonus stubs put 48 failing tests in
results.json, what Gradescope lists for that student, each reading::

    bonus masks: test_window_one_sees_only_itself
    not implemented yet (NotImplementedError: masks: not implemented yet (at masks.py line 26,
    in sliding_window_mask: raise NotImplementedError("masks: not implemented yet")))

and those bonus checks filled the class report's "Checks with the lowest pass rates".
"""

from __future__ import annotations

import pytest
from submission_tools import SOLUTIONS, STUBS, make_submission

from grader.core import engine
from grader.core.course import EXERCISES_BY_NAME, load
from grader.core.results import StudentRecord
from grader.integrations.outputs import class_report, report
from grader.integrations.outputs.class_page import lowest_checks
from grader.integrations.routes import gradescope

# A course of three exercises, so that a class of three grades in seconds.
COURSE_TOML = """\
[exercises.softmax]
points = 15
[exercises.masks]
track = "bonus"
points = 10
[exercises.gqa]
track = "bonus"
points = 10
"""
OTHERS = tuple(name for name in EXERCISES_BY_NAME() if name not in ("softmax", "masks", "gqa"))


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    """ada: softmax done, both bonus stubs untouched; bo: softmax and masks done, gqa's stub
    untouched; cy: softmax's stub untouched (a core exercise left undone), masks done."""
    root = tmp_path_factory.mktemp("class")
    course_file = root / "course.toml"
    course_file.write_text(COURSE_TOML + "".join(
        f"[exercises.{name}]\nenabled = false\n" for name in OTHERS))
    course = load(course_file)
    stub = {name: (STUBS / f"{name}.py").read_text() for name in ("softmax", "masks", "gqa")}
    key = {name: (SOLUTIONS / f"{name}.py").read_text() for name in ("softmax", "masks")}
    folders = {
        "ada": {"softmax.py": key["softmax"], "masks.py": stub["masks"], "gqa.py": stub["gqa"]},
        "bo": {"softmax.py": key["softmax"], "masks.py": key["masks"], "gqa.py": stub["gqa"]},
        "cy": {"softmax.py": stub["softmax"], "masks.py": key["masks"]},
    }
    results = {name: engine.grade_submission(make_submission(root / name, files, base=None),
                                             course=course, key_folder=SOLUTIONS)
               for name, files in folders.items()}
    # each student's record as batch holds it, and their results.json
    rows = {name: StudentRecord(name, "graded", result=result)
            for name, result in results.items()}
    return course, rows, results


def test_untouched_bonus_stubs_fail_no_test_and_are_not_attempted(klass):
    _, rows, results = klass
    ada = report.to_json(rows["ada"].result, include_output=True)
    assert [t["name"] for t in ada["tests"] if t["status"] == "failed"] == []
    assert all(t["tags"] == ["softmax"] for t in ada["tests"])  # no bonus test listed at all
    assert {n: e["attempted"] for n, e in ada["extra_data"]["bonus"].items()} == {
        "masks": False, "gqa": False}
    assert rows["ada"].bonus == {"masks": None, "gqa": None}  # blank in the CSV, as no file
    assert results["ada"].bonus["masks"].score == 0
    assert ada["score"] == 15


def test_a_started_bonus_lists_its_tests_and_the_untouched_one_none(klass):
    _, rows, _ = klass
    bo = report.to_json(rows["bo"].result, include_output=True)
    tags = {t["tags"][0] for t in bo["tests"]}
    assert tags == {"softmax", "masks"}
    assert rows["bo"].bonus == {"masks": 10, "gqa": None}


def test_an_untouched_core_stub_still_costs_its_points(klass):
    """A core stub scores 0 on every check, each listed failing: those are its points."""
    _, rows, _ = klass
    cy = report.to_json(rows["cy"].result, include_output=True)
    softmax = [t for t in cy["tests"] if t["tags"] == ["softmax"]]
    assert softmax and all(t["status"] == "failed" and t["score"] == 0 for t in softmax)
    assert all(t["output"].startswith("not implemented yet") for t in softmax)
    assert cy["extra_data"]["exercises"]["softmax"] == {
        "score": 0, "max_score": 15, "misconceptions": [], "attempted": False}
    assert rows["cy"].scores == {"softmax": 0} and rows["cy"].total == 0


def test_pass_rates_count_the_students_who_attempted_the_exercise(klass):
    """Every check the class got wrong was one left undone: no pass rate below 100%. The
    stub's 0 stays in softmax's scores; the report says who left it untouched."""
    course, rows, _ = klass
    summary = class_report.summarize(list(rows.values()), course)
    assert lowest_checks(summary) == []
    softmax_checks = [c for c in summary["checks"].values() if c["exercise"] == "softmax"]
    assert softmax_checks and all(c["students"] == 2 for c in softmax_checks)  # ada and bo
    assert all(c["students"] == 2 for c in summary["checks"].values()
               if c["exercise"] == "masks")  # bo and cy
    assert not any(c["exercise"] == "gqa" for c in summary["checks"].values())
    softmax = summary["exercises"]["softmax"]
    assert softmax["graded"] == 3 and softmax["min"] == 0 and softmax["not_attempted"] == ["cy"]
    assert summary["exercises"]["gqa"]["not_attempted"] == ["ada", "bo", "cy"]
    text = class_report.markdown(summary)
    assert "Every check passed for every student." in text
    assert "| not attempted |" in text and "| softmax | core | 15 | 3 | 10 | 15 | 2 | 1 | 0 |" \
        in text


def test_the_student_reads_which_bonus_exercise_was_not_attempted(klass):
    _, _, results = klass
    assert "Bonus not attempted (no file, or the stub untouched): gqa." in \
        gradescope.visible_summary(results["bo"])
    line = next(x for x in report.render(results["bo"]).splitlines() if x.startswith("gqa "))
    assert line.split() == ["gqa", "0", "/", "10", "not", "implemented", "yet"]
