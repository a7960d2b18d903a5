"""The bug zoo: every wrong implementation is caught, every named one diagnosed, every correct
one left alone, and every check is seen to fail at least once.

Each zoo submission is the key with one exercise file replaced. Only that exercise is graded
per entry; the others are byte-identical to the key (asserted below), and each exercise is
graded in its own worker with the references standing in for its siblings, so they score what
the key's single grading scores. One entry is also graded in full, as a sample of that claim.
Hypothesis's shrink phase is skipped (``zoo.catalog.shrinking``): it never changes a score.
"""

from __future__ import annotations

import pytest
from zoo.catalog import (
    BY_NAME, CORRECT, ENTRIES, KEY, NAMED, WRONG, build, grade_entry, grade_key, grade_many,
)

from grader import report
from grader.diagnose import MISCONCEPTIONS, feedback_line
from grader.exercises import EXERCISE_NAMES
from grader.registry import CHECKS, checks_for


@pytest.fixture(scope="module")
def key_result():
    return grade_key()


@pytest.fixture(scope="module")
def zoo_results():
    return {name: result.exercises for name, result in grade_many(ENTRIES, processes=2).items()}


def ids(entries):
    return [e.name for e in entries]


def test_answer_key_scores_full_marks_with_no_misconception(key_result):
    assert key_result.score == key_result.max_score == 100
    assert all(e.misconceptions == [] for e in key_result.exercises.values())


def test_catalog_covers_every_misconception_with_a_patched_key():
    assert {e.expect for e in NAMED} == set(MISCONCEPTIONS)
    assert len(WRONG) - len(NAMED) >= 12 and len(CORRECT) >= 5
    for entry in WRONG:
        text = entry.file.read_text()
        assert "# BUG:" in text, entry.name
        assert text != (KEY / f"{entry.exercise}.py").read_text(), entry.name


@pytest.mark.parametrize("entry", ENTRIES, ids=ids(ENTRIES))
def test_other_exercises_are_untouched_copies_of_the_key(entry, tmp_path):
    submission = build(entry, tmp_path)
    for name in EXERCISE_NAMES:
        expected = entry.file if name == entry.exercise else KEY / f"{name}.py"
        assert (submission / f"{name}.py").read_bytes() == expected.read_bytes(), name


@pytest.mark.parametrize("entry", WRONG, ids=ids(WRONG))
def test_wrong_entry_loses_points_in_its_exercise(entry, zoo_results, key_result):
    own = zoo_results[entry.name][entry.exercise]
    assert own.error is None, own.error  # caught by the checks, not by a crash or a timeout
    assert own.score < own.max_score
    others = [e for name, e in key_result.exercises.items() if name != entry.exercise]
    assert all(e.score == e.max_score and not e.misconceptions for e in others)


@pytest.mark.parametrize("entry", WRONG, ids=ids(WRONG))
def test_wrong_entry_carries_exactly_its_misconception(entry, zoo_results):
    own = zoo_results[entry.name][entry.exercise]
    assert own.misconceptions == ([entry.expect] if entry.expect else [])


@pytest.mark.parametrize("entry", CORRECT, ids=ids(CORRECT))
def test_correct_entry_scores_full_marks_with_no_misconception(entry, zoo_results):
    own = zoo_results[entry.name][entry.exercise]
    failing = [f"{c.name}: {c.feedback}" for c in own.checks if not c.passed]
    assert own.score == own.max_score, failing
    assert own.misconceptions == []


def test_every_check_fails_on_some_wrong_entry(zoo_results):
    failed = {
        (result.name, c.name)
        for name in ids(WRONG)
        for result in zoo_results[name].values()
        for c in result.checks
        if not c.passed
    }
    checks_for("softmax")  # importing the checks registers them all, hidden ones included
    never = [f"{c.exercise}: {c.name}" for c in CHECKS if (c.exercise, c.name) not in failed]
    assert never == []


@pytest.mark.parametrize("entry", NAMED, ids=ids(NAMED))
def test_diagnosis_hint_reaches_every_failing_check_and_the_report(entry, zoo_results):
    own = zoo_results[entry.name][entry.exercise]
    hint = feedback_line(entry.expect)
    assert all(hint in c.feedback for c in own.checks if not c.passed)
    assert all(hint not in c.feedback for c in own.checks if c.passed)


def test_full_grading_of_a_sample_entry_agrees(key_result):
    """The sample, graded in all six exercises, shows what the byte-identity argument says."""
    entry = BY_NAME["attention_mask_polarity"]
    full = grade_entry(entry, tuple(EXERCISE_NAMES))
    for name, result in full.exercises.items():
        if name == entry.exercise:
            assert result.score < result.max_score and result.misconceptions == [entry.expect]
        else:
            assert (result.score, result.misconceptions) == (key_result.exercises[name].score, [])
    text = report.render(full)
    assert text.count(feedback_line(entry.expect)) == 1  # once, above the failing checks
    exported = report.to_json(full)
    assert exported["extra_data"]["exercises"]["attention"]["misconceptions"] == [entry.expect]
    outputs = [t["output"] for t in exported["tests"] if t["status"] == "failed"]
    assert outputs and all(feedback_line(entry.expect) in o for o in outputs)
