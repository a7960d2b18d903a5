"""The bonus track: graded apart from the core points, when its files are there. (Its zoo
entries are in tests/zoo with the core ones.)"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest
from submission_tools import BONUS as BONUS_NAMES
from submission_tools import CORE as EXERCISE_NAMES
from submission_tools import COURSE, EXERCISES, checks_for
from zoo.catalog import BY_NAME as ZOO

from grader.core import engine
from grader.integrations.outputs import report
from grader.integrations.routes.stubs import stub_sources

ROOT = Path(__file__).resolve().parent.parent

@pytest.fixture(scope="module")
def answer_key() -> engine.SubmissionResult:
    return engine.grade_submission(ROOT / "solutions", exercises=list(BONUS_NAMES))


@pytest.fixture(scope="module")
def core_only(tmp_path_factory) -> engine.SubmissionResult:
    folder = tmp_path_factory.mktemp("core_only")
    for name in EXERCISE_NAMES:
        shutil.copy(ROOT / "solutions" / f"{name}.py", folder)
    return engine.grade_submission(folder)


def test_bonus_check_points_add_up_to_each_exercise():
    for name in BONUS_NAMES:
        assert sum(c.points for c in checks_for(name)) == EXERCISES[name].points
    assert COURSE.total() == 100


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
        assert result.score == result.max_score == EXERCISES[name].points
        assert result.misconceptions == []
    assert answer_key.bonus_score == answer_key.bonus_max_score == COURSE.total("bonus")


def test_stubs_get_zero_and_not_implemented_yet():
    """An untouched stub is not attempted, as a missing file is (tests/test_not_attempted.py):
    its status reads as the stub's checks do."""
    result = engine.grade_submission(ROOT / "exercises", exercises=list(BONUS_NAMES))
    for name in BONUS_NAMES:
        bonus = result.bonus[name]
        assert not bonus.attempted and bonus.score == 0 and bonus.not_implemented
        assert bonus.misconceptions == [] and report.status(bonus) == "not implemented yet"


def test_submission_without_bonus_files_keeps_core_score_and_is_not_attempted(core_only):
    assert core_only.score == core_only.max_score == COURSE.total()
    for name in BONUS_NAMES:
        bonus = core_only.bonus[name]
        assert not bonus.attempted and bonus.error is None and bonus.checks == []
        assert bonus.score == 0 and bonus.max_score == EXERCISES[name].points
    data = report.to_json(core_only)
    assert data["score"] == COURSE.total()
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
        points = COURSE.points(name)
        assert entry == {"score": points, "max_score": points, "misconceptions": [],
                         "attempted": True}
        tagged = [t for t in data["tests"] if t["tags"] == [name, "bonus"]]
        assert len(tagged) == len(answer_key.bonus[name].checks)


def test_a_wrong_bonus_file_costs_only_its_bonus_exercise(tmp_path):
    shutil.copy(ROOT / "solutions" / "kv_cache.py", tmp_path)
    (tmp_path / "masks.py").write_text(ZOO["window_off_by_one"].source())
    result = engine.grade_submission(tmp_path, exercises=["kv_cache", "masks", "gqa"])
    assert result.score == result.max_score == EXERCISES["kv_cache"].points
    assert result.bonus["masks"].score < 10
    assert result.bonus["masks"].misconceptions == ["window-off-by-one"]
    assert not result.bonus["gqa"].attempted


def test_flash_tells_its_memory_in_steps_the_kernels_jitter_cannot_cross():
    # The kernel's peak for one file moved from 97.01 to 97.26 MiB over five runs: the
    # feedback tells the same figure for both, and never more than was measured.
    from grader.problems import flash

    mib = flash.MIB
    assert flash.shown_mib(int(97.01 * mib)) == flash.shown_mib(int(97.26 * mib)) == 96
    assert flash.shown_mib(flash.MEMORY_LIMIT) == flash.MEMORY_LIMIT // mib == 16
    assert flash.shown_mib(24 * mib - 1) == 16 and flash.shown_mib(24 * mib) == 24


def test_flash_stub_states_the_memory_check_the_kit_runs():
    """The stub's contract gives the memory check's own numbers and says what is measured (it
    once told of a tracemalloc trace at T = 1024 against 4 MiB, a check the kit no longer runs)."""
    from grader.problems import flash

    tree = ast.parse(stub_sources()["flash.py"])
    function = next(node for node in tree.body if isinstance(node, ast.FunctionDef))
    doc = " ".join((ast.get_docstring(function) or "").split())
    t = flash.MEMORY_T
    for said in (f"``Tq = Tk = {t}``", f"``d_k = d_v = {flash.MEMORY_D}``",
                 f"``block_size = {flash.MEMORY_BLOCK}``", "fresh worker", "peak memory",
                 "the kernel counts", f"under {flash.MEMORY_LIMIT // flash.MIB} MiB, half of one "
                 f"``({t}, {t})`` float64 array"):
        assert said in doc, said
    assert flash.MEMORY_LIMIT * 2 == flash.FULL_SCORES == t * t * 8
    assert "tracemalloc" not in doc
