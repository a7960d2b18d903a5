"""The bug zoo: every wrong implementation is caught, every named one diagnosed, every correct
one left alone, and every check is seen to fail at least once.

Each zoo submission is the key with one exercise file replaced, graded in full (all six core
exercises, the real grading profile and limits), as a student's submission is.
"""

from __future__ import annotations

import pytest
from zoo.catalog import (
    BY_NAME,
    CORRECT,
    ENTRIES,
    KEY,
    NAMED,
    WRONG,
    apply_patch,
    build,
    grade_many,
)

from grader import report
from grader.diagnose import MISCONCEPTIONS, feedback_line
from grader.exercises import EXERCISE_NAMES
from grader.registry import CHECKS, checks_for


@pytest.fixture(scope="module")
def zoo_results():
    return {name: result.exercises for name, result in grade_many(ENTRIES, processes=2).items()}


def ids(entries):
    return [e.name for e in entries]


def test_catalog_covers_every_misconception_with_a_patched_key():
    assert {e.expect for e in NAMED} == set(MISCONCEPTIONS)
    assert len(WRONG) - len(NAMED) >= 12 and len(CORRECT) >= 5
    for entry in WRONG:
        text = entry.source()  # the key's file with the entry's patch applied
        assert "# BUG:" in text, entry.name
        assert text != (KEY / f"{entry.exercise}.py").read_text(), entry.name


def test_a_patch_that_no_longer_fits_the_key_fails_loudly():
    entry = BY_NAME["attention_mask_after_softmax"]
    key = (KEY / "attention.py").read_text()
    moved = key.replace("scores = np.where(mask, -np.inf, scores)", "scores[mask] = -np.inf")
    assert moved != key
    with pytest.raises(ValueError, match="does not fit the key"):
        apply_patch(moved, entry.file.read_text())


@pytest.mark.parametrize("entry", ENTRIES, ids=ids(ENTRIES))
def test_other_exercises_are_untouched_copies_of_the_key(entry, tmp_path):
    submission = build(entry, tmp_path)
    for name in EXERCISE_NAMES:
        expected = entry.source() if name == entry.exercise else (KEY / f"{name}.py").read_text()
        assert (submission / f"{name}.py").read_text() == expected, name


@pytest.mark.parametrize("entry", WRONG, ids=ids(WRONG))
def test_wrong_entry_loses_points_in_its_exercise_only(entry, zoo_results):
    own = zoo_results[entry.name][entry.exercise]
    assert own.error is None, own.error  # caught by the checks, not by a crash or a timeout
    assert own.score < own.max_score
    others = [e for name, e in zoo_results[entry.name].items() if name != entry.exercise]
    assert len(others) == 5
    assert all(e.score == e.max_score and not e.misconceptions for e in others)


@pytest.mark.parametrize("entry", WRONG, ids=ids(WRONG))
def test_wrong_entry_carries_exactly_its_misconception(entry, zoo_results):
    own = zoo_results[entry.name][entry.exercise]
    assert own.misconceptions == ([entry.expect] if entry.expect else [])


@pytest.mark.parametrize("entry", CORRECT, ids=ids(CORRECT))
def test_correct_entry_scores_full_marks_with_no_misconception(entry, zoo_results):
    for result in zoo_results[entry.name].values():
        failing = [f"{c.name}: {c.feedback}" for c in result.checks if not c.passed]
        assert result.score == result.max_score, failing
        assert result.misconceptions == []
    assert sum(r.score for r in zoo_results[entry.name].values()) == 100


def test_every_check_fails_on_some_wrong_entry(zoo_results):
    failed = {
        (result.name, c.name)
        for name in ids(WRONG)
        for result in zoo_results[name].values()
        for c in result.checks
        if not c.passed
    }
    checks_for("softmax")  # importing the checks registers them all, hidden ones included
    never = [
        f"{c.exercise}: {c.name}"
        for c in CHECKS
        if c.exercise in EXERCISE_NAMES and (c.exercise, c.name) not in failed
    ]  # the bonus checks have their own zoo (tests/test_bonus.py)
    assert never == []


@pytest.mark.parametrize("entry", NAMED, ids=ids(NAMED))
def test_diagnosis_hint_reaches_every_failing_check_and_the_report(entry, zoo_results):
    own = zoo_results[entry.name][entry.exercise]
    hint = feedback_line(entry.expect)
    assert all(hint in c.feedback for c in own.checks if not c.passed)
    assert all(hint not in c.feedback for c in own.checks if c.passed)


def test_report_and_json_carry_the_diagnosis(zoo_results, tmp_path):
    from grader.engine import grade_submission

    entry = BY_NAME["attention_mask_polarity"]
    full = grade_submission(build(entry, tmp_path), exercises=EXERCISE_NAMES)
    assert full.exercises["attention"].misconceptions == [entry.expect]
    text = report.render(full)
    assert text.count(feedback_line(entry.expect)) == 1  # once, above the failing checks
    exported = report.to_json(full)
    assert exported["extra_data"]["exercises"]["attention"]["misconceptions"] == [entry.expect]
    outputs = [t["output"] for t in exported["tests"] if t["status"] == "failed"]
    assert outputs and all(feedback_line(entry.expect) in o for o in outputs)
