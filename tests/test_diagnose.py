"""Diagnosis probes: silent on every correct implementation, harmless when the code misbehaves.

The zoo (test_zoo.py) shows each probe naming its mistake. Here the probes run directly, without
the engine's "only when a check failed" shortcut, on the answer key and on every correct zoo
entry: none may name anything.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from submission_tools import CORE as EXERCISE_NAMES
from submission_tools import EXERCISES
from zoo.catalog import CORRECT, KEY

from grader.core.diagnose import catalog, diagnose, matches
from grader.core.engine import copy_submission
from grader.core.student import Student
from grader.sandbox.errors import StudentError, WorkerLost
from grader.sandbox.isolation import Sandbox


def diagnose_file(exercise, path):
    """Load ``path`` as the exercise in a worker, as the engine does, and probe it."""
    with tempfile.TemporaryDirectory(prefix="diagnose-") as tmp:
        os.chmod(tmp, 0o755)  # the worker may run as an unprivileged user
        staged, folder = Path(tmp) / "staged", Path(tmp) / "submission"
        staged.mkdir()
        folder.mkdir()
        shutil.copyfile(path, staged / f"{exercise}.py")
        copy_submission(staged, folder)
        with Sandbox(folder, exercise) as sandbox:
            student = Student(sandbox, EXERCISES[exercise])
            student.load()
            outcomes = {}
            for _, probe in EXERCISES[exercise].probes:
                try:
                    outcomes[probe.__name__] = probe(student)
                except StudentError as error:  # a correct submission rejects a fully masked row
                    outcomes[probe.__name__] = error.info["type"]
            return diagnose(EXERCISES[exercise], student), outcomes


def assert_silent(exercise, path):
    """diagnose() names nothing, and each probe really ran: it answered False, or (only for a
    fully masked row) the code raised the ValueError the contract asks for."""
    found, outcomes = diagnose_file(exercise, path)
    assert found == []
    for name, outcome in outcomes.items():
        assert outcome is False or ("fully_masked" in name and outcome == "ValueError"), name


def test_every_misconception_is_probed_and_every_probe_names_a_declared_one():
    probed = {m for e in EXERCISES.values() for m, _ in e.probes}
    assert probed == set(catalog())


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_probes_name_nothing_in_the_answer_key(exercise):
    assert_silent(exercise, KEY / f"{exercise}.py")


@pytest.mark.parametrize("entry", CORRECT, ids=[e.name for e in CORRECT])
def test_probes_name_nothing_in_a_correct_zoo_entry(entry):
    assert_silent(entry.exercise, entry.file)


class Raising:
    """A stand-in student whose every call raises ``error``."""

    def __init__(self, error):
        self.error = error
        self.calls = 0

    def __getattr__(self, name):
        def call(*args, **kwargs):
            self.calls += 1
            raise self.error

        return call


def test_a_raising_submission_is_not_diagnosed():
    error = StudentError({"type": "RuntimeError", "message": "no", "value_error": False})
    for exercise in EXERCISE_NAMES:
        assert diagnose(EXERCISES[exercise], Raising(error)) == []


def test_a_lost_worker_ends_probing_without_raising():
    student = Raising(WorkerLost("the worker crashed"))
    assert diagnose(EXERCISES["mha"], student) == []
    assert student.calls == 1


def test_matches_requires_same_shape_and_nan_positions():
    assert matches(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]))
    assert not matches(np.array([0.5, 1.0]), np.array([np.nan, 1.0]))
    assert not matches(np.ones((1, 2)), np.ones(2))


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_every_probe_explains_visible_checks_of_its_own_exercise(exercise):
    """``explains`` names checks that exist; hidden ones never (their names stay out of the
    handout, and a hidden check carries a hint its example earns whatever the list says)."""
    spec = EXERCISES[exercise]
    visible = {c.name for c in spec.checks if not c.hidden}
    assert set(spec.explained) == {m for m, _ in spec.probes}
    for misconception, names in spec.explained.items():
        assert names and set(names) <= visible, misconception


def test_a_probe_must_explain_some_check_and_give_its_mistaken_version():
    """Without a mistaken version no example could earn the hint (on 4e1a685 a probe without
    one put its hint under every failing check it listed, whatever the check's example)."""
    from grader.core.exercise import Exercise

    spec = Exercise("x", functions=("f",), framework="numpy", track="core", points=1, order=1,
                    title="x")
    with pytest.raises(ValueError, match="explains no check"):
        spec.probe("some-mistake", explains=(), mistaken={"f": lambda: []})
    with pytest.raises(ValueError, match="has no mistaken version"):
        spec.probe("some-mistake", explains=("test_f",), mistaken={})
