"""Hidden checks cover the same cases under every course secret (issue 38).

A hidden check draws its examples from the course secret, so that no handout can know them.
It drew their structure from the secret too, and whether it met a batched mask, a per-head
mask or a block of keys all blocked for a query was luck: an attention that reads only the
first batch entry of a batched mask scored 15 of 20 under some secrets and 14 under others.
Each hidden check now runs, after what it draws, fixed cases (``Check.cases``) whose
structure (shapes, dtypes, the kind of mask) is the same under every secret and whose values
come from it; so every zoo entry scores the same under every secret.
"""

from __future__ import annotations

import multiprocessing
import tempfile
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from submission_tools import COURSE, EXERCISES, SOLUTIONS
from zoo.catalog import BY_NAME, ENTRIES, build

from grader.core import engine, exercise
from grader.core.answer_key import AnswerKey
from grader.core.assertions import CheckFailed
from grader.core.delegation_verdicts import violations
from grader.core.exercise import Context, Exercise

# The zoo's grades are made under the secret "" (tests/conftest.py); these are the others.
SECRETS = ("a course secret", "another course's secret", "0f3c9e1d5a7b2c4e")
HIDDEN = [c for e in EXERCISES.values() for c in e.checks if c.hidden]


def hidden_verdicts(name: str) -> dict[str, dict[str, bool]]:
    """Whether each hidden check of the zoo entry's exercise passes, under each of ``SECRETS``:
    run in this process (a fork of the tests'), the entry's file answering as the answer key
    does (``AnswerKey``: the same calls and operations as in a worker, the replies converted
    as a worker converts them, its warnings not errors, as in a worker), without shrinking a
    failure (which changes what is shown, never whether it fails)."""
    exercise.GRADING = settings(exercise.GRADING, phases=[
        p for p in exercise.GRADING.phases if p is not Phase.shrink])
    entry = BY_NAME[name]
    checks = [c for c in EXERCISES[entry.exercise].checks if c.hidden]
    with tempfile.TemporaryDirectory(prefix="zoo-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        folder = build(entry, Path(tmp))
        ctx = Context(AnswerKey(folder, EXERCISES[entry.exercise]),
                      AnswerKey(SOLUTIONS, EXERCISES[entry.exercise]))
        return {secret: {c.name: engine.run_check(c, ctx, COURSE, c.points, secret).passed
                         for c in checks} for secret in SECRETS}


@pytest.fixture(scope="module")
def secret_verdicts() -> dict[str, dict[str, dict[str, bool]]]:
    """Every zoo entry's hidden verdicts under ``SECRETS``, two entries at a time in forks (what
    a check records or keeps for replay stays there)."""
    names = [e.name for e in ENTRIES]
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        return dict(zip(names, pool.map(hidden_verdicts, names)))


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_zoo_entry_scores_the_same_under_every_course_secret(entry, zoo_results,
                                                             secret_verdicts):
    """The visible checks draw nothing from the secret; the hidden ones, run under three more
    secrets, pass or fail as they did in the zoo's grade, so the score is the zoo's."""
    graded = zoo_results[entry.name][entry.exercise]
    rule = EXERCISES[entry.exercise].rule
    if violations(entry.source(), rule, own_modules=frozenset(EXERCISES[entry.exercise].uses)):
        assert graded.score == 0 and graded.error.startswith("it uses")  # no code ever ran
        return
    expected = {c.name: c.passed for c in graded.checks if c.hidden}
    assert expected, "the zoo's grade has the hidden checks"
    assert secret_verdicts[entry.name] == {secret: expected for secret in SECRETS}


def test_attention_reading_the_first_batch_entry_of_a_mask_scores_14_under_every_secret(
        zoo_results, tmp_path, monkeypatch):
    """The issue's case, graded as a course grades it: before, 15 under the secret "" and 14
    under this one."""
    entry = BY_NAME["attention_batched_mask_first_entry"]
    monkeypatch.setenv("ATTENTION_KIT_SECRET", SECRETS[1])
    graded = engine.grade_submission(build(entry, tmp_path), exercises=["attention"])
    for result in (zoo_results[entry.name]["attention"], graded.results["attention"]):
        checks = {c.name: c for c in result.checks}
        assert result.score == 14, [c.name for c in result.checks if not c.passed]
        hidden = checks["test_attention_matches_answer_key"]
        assert not hidden.passed
        assert "Property: scaled_dot_product_attention agrees with the answer key." in (
            hidden.feedback)
        assert "mask [[[" in hidden.feedback  # the failing input's mask has a batch axis


def structure(value):
    """What a fixed case pins: the dtype and shape of an array, the type of an int (a size
    drawn from the secret), whether a field is None; floats and bools as they are."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape)
    if isinstance(value, dict):
        return {name: structure(v) for name, v in value.items()}
    if isinstance(value, (tuple, list)):
        return tuple(structure(v) for v in value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return "int"
    return value


def values(value) -> list:
    """Every number of a fixed case, in order."""
    if isinstance(value, np.ndarray):
        return value.ravel().tolist()
    if isinstance(value, dict):
        return [x for v in value.values() for x in values(v)]
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in values(v)]
    return [value]


@pytest.mark.parametrize("check", HIDDEN, ids=[f"{c.exercise}.{c.name}" for c in HIDDEN])
def test_hidden_check_fixes_its_structures_and_draws_their_values_from_the_secret(check):
    under = {secret: check.fixed_cases(secret) for secret in ("", *SECRETS)}
    first = under[""]
    assert len(first) >= 3
    for secret, cases in under.items():
        assert [structure(c) for c in cases] == [structure(c) for c in first], secret
        assert values(cases) == values(check.fixed_cases(secret))  # the same each time
    # The values are not those a handout computes without the secret (kv_cache's and masks'
    # are a few small sizes, which another secret may give again).
    assert any(values(cases) != values(first) for cases in under.values())


def test_fixed_masks_show_how_they_were_read():
    """Every fixed mask of a batch differs from one batch entry to the next, blocks a key in
    each slice and leaves each query one."""
    seen = 0
    for check in HIDDEN:
        for case in check.fixed_cases(SECRETS[0]):
            for value in case.values():
                mask = getattr(value, "mask", None)
                if mask is None:
                    continue
                slices = mask.reshape(-1, *mask.shape[-2:])
                assert (~slices).any(axis=-1).all() and slices.any(axis=(-2, -1)).all()
                if len(slices) > 1:
                    seen += 1
                    assert len({s.tobytes() for s in slices}) == len(slices), check.name
    assert seen >= 5  # attention (2), attention_backward, flash, mha


def test_fixed_cases_run_after_the_drawn_examples_and_a_failing_one_is_shown_as_given():
    """Drawn examples fail first, and shrink; where they all pass, the first failing fixed case
    ends the check, shown as it is (no shrinking made it the smallest)."""
    toy = Exercise("toy", functions=("f",), framework="numpy", track="core", points=2, order=99,
                   title="toy")
    ran = []

    def cases(rng):
        return [{"n": int(rng.integers(0, 7))}, {"n": 7}, {"n": 8}]

    @toy.check(points=1, prop="n is below 7.", hidden=True, cases=cases)
    @given(n=st.integers(0, 6))
    def test_below_seven(ctx, n):
        ran.append(n)
        if n >= 7:
            raise CheckFailed(f"n is {n}")

    @toy.check(points=1, prop="n is below 3.", hidden=True, cases=cases)
    @given(n=st.integers(0, 6))
    def test_below_three(ctx, n):
        if n >= 3:
            raise CheckFailed(f"n is {n}")

    seven, three = toy.checks
    result = engine.run_check(seven, Context(None), COURSE, 1, "a secret")
    assert ran[-1] == 7 and max(ran[:-1]) <= 6  # the drawn examples, the first fixed case, 7
    assert result.feedback == ("Property: n is below 7.\nFailed: n is 7\n"
                               "Failing input (a fixed case): n 7")
    result = engine.run_check(three, Context(None), COURSE, 1, "a secret")
    assert result.feedback == ("Property: n is below 3.\nFailed: n is 3\n"
                               "Smallest failing input: n 3")
