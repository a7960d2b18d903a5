"""The answer key scores 100, the stubs score 0, and the JSON has Gradescope's shape."""

from __future__ import annotations

import pytest
from submission_tools import BONUS, CORE, COURSE, EXERCISES, SOLUTIONS, STUBS, checks_for

from grader.core import engine
from grader.integrations.outputs import report


def test_points_add_up_to_the_rubric():
    for exercise in EXERCISES.values():
        assert sum(c.points for c in checks_for(exercise.name)) == exercise.points, exercise.name


def test_every_check_states_its_property_and_has_a_unique_name():
    names = set()
    for exercise in EXERCISES.values():
        for c in checks_for(exercise.name):
            assert c.prop.endswith(".") and len(c.prop) > 10, c.name
            assert (c.exercise, c.name) not in names
            names.add((c.exercise, c.name))


def test_answer_key_scores_full_marks(key_result):
    assert key_result.key_present
    failing = [c.feedback for e in key_result.exercises.values() for c in e.checks if not c.passed]
    assert failing == []
    assert key_result.score == key_result.max_score == COURSE.total()


@pytest.mark.parametrize("exercise", COURSE.names())
def test_the_key_keeps_every_point(exercise, key_result):
    """Each exercise's key, graded by the kit as a submission (hidden checks included, core or
    bonus): every check passes with all its points, nothing withheld for ignoring its input,
    no misconception named. (A key whose answers hold -inf, NaN, integers, a tuple or
    booleans: tests/test_no_key_convicted.py.)"""
    result = key_result.results[exercise]
    failing = [f"{c.name}: {c.feedback}" for c in result.checks if not c.passed]
    assert failing == [] and result.error is None
    assert [c.name for c in result.checks if c.points != c.max_points] == []
    assert result.score == result.max_score == COURSE.points(exercise)
    assert result.misconceptions == []


def test_stubs_score_zero_with_not_implemented_messages():
    result = engine.grade_submission(STUBS)
    assert result.score == 0
    for exercise in result.exercises.values():
        assert exercise.not_implemented, exercise.name
    text = report.render(result)
    assert text.count("not implemented yet") == len(CORE) + len(BONUS)  # bonus stubs too


def test_json_has_gradescope_keys(key_result):
    data = report.to_json(key_result)
    assert data["score"] == COURSE.total()
    assert set(data["extra_data"]["exercises"]) == set(CORE)
    for entry in data["extra_data"]["exercises"].values():
        assert entry["score"] == entry["max_score"]
        assert entry["misconceptions"] == []
    core_tests = [t for t in data["tests"] if "bonus" not in t["tags"]]  # bonus: test_bonus.py
    assert sum(t["max_score"] for t in core_tests) == COURSE.total()
    for test in core_tests:
        assert set(test) >= {"name", "score", "max_score", "status", "output", "tags"}
        assert test["status"] in ("passed", "failed")
        assert test["tags"][0] in data["extra_data"]["exercises"]
        assert test["visibility"] in ("visible", "after_published")
    assert any(t["visibility"] == "after_published" for t in data["tests"])


def test_without_the_key_hidden_checks_are_skipped_and_said(tmp_path):
    result = engine.grade_submission(SOLUTIONS, key_folder=None,
                                     exercises=["heads"])
    assert not result.key_present
    assert result.exercises["heads"].score == result.exercises["heads"].max_score
    assert result.hidden_points_skipped == sum(c.points for c in checks_for("heads") if c.hidden)
    assert "hidden checks" in report.render(result)
