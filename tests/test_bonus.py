"""The bonus track: graded apart from the core points, diagnosed, and proven on a zoo.

Every zoo entry is graded on its own exercise only (the other exercises are independent
workers, so grading them would prove nothing more and cost minutes).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader import engine, report
from grader.exercises import BONUS, BONUS_NAMES, BY_NAME, EXERCISE_NAMES, TOTAL_POINTS
from grader.registry import checks_for
from grader.stubs import stub_sources

ROOT = Path(__file__).resolve().parent.parent
ZOO = Path(__file__).resolve().parent / "zoo_bonus"

# entry -> (exercise, the misconception id it must carry, or None)
WRONG = {
    "window_off_by_one": ("masks", "window-off-by-one"),
    "padding_on_queries": ("masks", "padding-on-queries"),
    "window_not_causal": ("masks", None),
    "backward_missing_mask": ("attention_backward", "backward-missing-mask"),
    "backward_no_scale": ("attention_backward", None),
    "backward_diagonal_softmax": ("attention_backward", None),
    "gqa_interleave_order": ("gqa", "gqa-interleave-order"),
    "gqa_full_width_kv": ("gqa", None),
    "gqa_wrong_scale": ("gqa", None),
    "decode_upper_left": ("decode", "decode-upper-left"),
    "decode_unchecked_cache": ("decode", None),
    "decode_len_counts_appends": ("decode", None),
    "decode_newest_first": ("decode", None),
}
CORRECT = {
    "masks_correct_loops": "masks",
    "backward_correct_jacobian": "attention_backward",
    "gqa_correct_einsum": "gqa",
    "decode_correct_lists": "decode",
}


@pytest.fixture(scope="module")
def zoo() -> dict[str, engine.ExerciseResult]:
    entries = {**{e: ex for e, (ex, _) in WRONG.items()}, **CORRECT}
    return {
        entry: engine.grade_submission(ZOO / entry, exercises=[exercise]).bonus[exercise]
        for entry, exercise in entries.items()
    }


@pytest.fixture(scope="module")
def answer_key() -> engine.SubmissionResult:
    return engine.grade_submission(ROOT / "solutions", exercises=list(BONUS_NAMES))


@pytest.fixture(scope="module")
def core_only(tmp_path_factory) -> engine.SubmissionResult:
    folder = tmp_path_factory.mktemp("core_only")
    for name in EXERCISE_NAMES:
        shutil.copy(ROOT / "solutions" / f"{name}.py", folder)
    return engine.grade_submission(folder)


def test_zoo_table_covers_every_bonus_misconception():
    ids = {"window-off-by-one", "padding-on-queries", "gqa-interleave-order",
           "decode-upper-left", "backward-missing-mask"}
    assert {i for _, i in WRONG.values() if i} == ids
    assert set(CORRECT.values()) == set(BONUS_NAMES)
    assert sorted(p.name for p in ZOO.iterdir() if p.is_dir()) == sorted({*WRONG, *CORRECT})


def test_bonus_check_points_add_up_to_each_exercise():
    for exercise in BONUS:
        assert sum(c.points for c in checks_for(exercise.name)) == exercise.points
    assert TOTAL_POINTS == 100


def test_bonus_stubs_are_generated_from_the_answer_key():
    sources = stub_sources()
    for name in BONUS_NAMES:
        assert (ROOT / "exercises" / f"{name}.py").read_text() == sources[f"{name}.py"]


def test_answer_key_gets_full_bonus_marks(answer_key):
    assert answer_key.exercises == {}
    for name in BONUS_NAMES:
        result = answer_key.bonus[name]
        failing = [c.feedback for c in result.checks if not c.passed]
        assert failing == [] and result.error is None
        assert result.score == result.max_score == BY_NAME[name].points
        assert result.misconceptions == []
    assert answer_key.bonus_score == answer_key.bonus_max_score == 40


def test_stubs_get_zero_and_not_implemented_yet():
    result = engine.grade_submission(ROOT / "exercises", exercises=list(BONUS_NAMES))
    for name in BONUS_NAMES:
        bonus = result.bonus[name]
        assert bonus.attempted and bonus.score == 0 and bonus.not_implemented
        assert bonus.misconceptions == []


def test_submission_without_bonus_files_keeps_core_score_and_is_not_attempted(core_only):
    assert core_only.score == core_only.max_score == TOTAL_POINTS
    for name in BONUS_NAMES:
        bonus = core_only.bonus[name]
        assert not bonus.attempted and bonus.error is None and bonus.checks == []
        assert bonus.score == 0 and bonus.max_score == BY_NAME[name].points
    data = report.to_json(core_only)
    assert data["score"] == TOTAL_POINTS
    assert not any("bonus" in t["tags"] for t in data["tests"])
    assert {n: e["attempted"] for n, e in data["extra_data"]["bonus"].items()} == dict.fromkeys(
        BONUS_NAMES, False)
    text = report.render(core_only)
    assert "status (not part of the total)" in text
    assert text.count("not attempted") == len(BONUS_NAMES)


def test_results_json_keeps_bonus_apart_from_the_core_score(answer_key):
    data = report.to_json(answer_key)
    assert data["score"] == 0  # no core exercise was graded: bonus points never enter it
    for name in BONUS_NAMES:
        entry = data["extra_data"]["bonus"][name]
        assert entry == {"score": 10, "max_score": 10, "misconceptions": [], "attempted": True}
        tagged = [t for t in data["tests"] if t["tags"] == [name, "bonus"]]
        assert len(tagged) == len(answer_key.bonus[name].checks)


def test_a_wrong_bonus_file_costs_only_its_bonus_exercise(tmp_path):
    shutil.copy(ROOT / "solutions" / "kv_cache.py", tmp_path)
    shutil.copy(ZOO / "window_off_by_one" / "masks.py", tmp_path)
    result = engine.grade_submission(tmp_path, exercises=["kv_cache", "masks", "gqa"])
    assert result.score == result.max_score == BY_NAME["kv_cache"].points
    assert result.bonus["masks"].score < 10
    assert result.bonus["masks"].misconceptions == ["window-off-by-one"]
    assert not result.bonus["gqa"].attempted


@pytest.mark.parametrize("entry", sorted(WRONG))
def test_wrong_entry_loses_points_and_carries_exactly_its_id(zoo, entry):
    exercise, misconception = WRONG[entry]
    result = zoo[entry]
    assert result.error is None
    assert result.score < result.max_score == BY_NAME[exercise].points
    assert result.misconceptions == ([misconception] if misconception else [])


@pytest.mark.parametrize("entry", sorted(CORRECT))
def test_correct_variant_gets_full_marks_and_no_id(zoo, entry):
    result = zoo[entry]
    assert [c.feedback for c in result.checks if not c.passed] == []
    assert result.score == result.max_score == BY_NAME[CORRECT[entry]].points
    assert result.misconceptions == []


@pytest.mark.parametrize("exercise", BONUS_NAMES)
def test_every_bonus_check_fails_on_some_wrong_entry(zoo, exercise):
    failed = {c.name for entry, (ex, _) in WRONG.items() if ex == exercise
              for c in zoo[entry].checks if not c.passed}
    assert {c.name for c in checks_for(exercise)} - failed == set()
