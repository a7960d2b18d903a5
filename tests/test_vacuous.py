"""No points for ignoring the input (``grader.core.vacuous``): a result that is the same for
two inputs, one repeated value, or an argument as it was given earns no check's points; the
answer key never looks like one on any exercise's informative inputs, whatever the secret."""

from __future__ import annotations

import numpy as np
import pytest
from submission_tools import COURSE, EXERCISES, SOLUTIONS

from grader.core.engine import CheckResult
from grader.core.student import AnswerKey
from grader.core.vacuous import examples, ignores_input, withhold

SECRETS = ("", "0123456789abcdef" * 2, "f" * 32)


@pytest.mark.parametrize("exercise", COURSE.names())
def test_the_answer_key_never_ignores_its_input(exercise):
    spec = EXERCISES[exercise]
    key = AnswerKey(SOLUTIONS, spec)
    assert spec.informative, f"{exercise} declares no informative inputs"
    for info in spec.informative:
        for secret in SECRETS:
            inputs = examples(spec, info.call, secret)
            assert len(inputs) == 2
            results = [getattr(key, info.call)(*args) for args in inputs]
            assert ignores_input(inputs, results) is None, (info.call, secret)


def test_the_examples_follow_the_secret_and_only_it():
    spec = EXERCISES["softmax"]
    again = examples(spec, "softmax", SECRETS[1])
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(again, examples(spec, "softmax",
                                                                          SECRETS[1])))
    assert not np.array_equal(again[0][0], examples(spec, "softmax", SECRETS[2])[0][0])


def test_uniform_constant_and_identity_results_ignore_their_input():
    rng = np.random.default_rng(0)
    inputs = [(rng.standard_normal((2, 3)), -1) for _ in range(2)]
    uniform = [np.full((2, 3), 1 / 3) for _ in inputs]
    assert "same result for two different inputs" in ignores_input(inputs, uniform)
    assert "returned one of its arguments unchanged" in ignores_input(
        inputs, [x for x, _ in inputs])
    # a mask that blocks nothing, for inputs of different sizes
    assert "every entry of its result is the same number" in ignores_input(
        [(2,), (3,)], [np.zeros((2, 2), bool), np.zeros((3, 3), bool)])
    # one part of a tuple is enough: attention whose weights are uniform
    outputs = [(rng.standard_normal((3, 2)), np.full((3, 3), 1 / 3)) for _ in inputs]
    assert ignores_input(inputs, outputs) is not None


def test_a_wrong_result_that_depends_on_its_input_is_not_judged():
    rng = np.random.default_rng(1)
    inputs = [(rng.standard_normal((2, 3)), -1) for _ in range(2)]
    no_exp = [x / x.sum(axis=-1, keepdims=True) for x, _ in inputs]  # wrong, not vacuous
    assert ignores_input(inputs, no_exp) is None
    reshaped = [x.reshape(3, 2) for x, _ in inputs]  # the input's numbers, another shape
    assert ignores_input(inputs, reshaped) is None
    assert ignores_input([(2,), (3,)], [2, 3]) is None  # a number is never judged


def test_only_a_passed_check_that_called_it_loses_its_points():
    found = {"softmax": "Passed, but no points: softmax ignores its input (...)"}

    def result(passed):
        return CheckResult("softmax", "test_x", "A property.", 2 if passed else 0, 2, False,
                           passed, "" if passed else "Property: A property.\nFailed: no")

    passed, other, failed = result(True), result(True), result(False)
    withhold(passed, {"softmax"}, found)
    withhold(other, {"mha_build"}, found)
    withhold(failed, {"softmax"}, found)
    assert (passed.points, passed.passed) == (0, False)
    assert passed.feedback == "Property: A property.\n" + found["softmax"]
    assert (other.points, other.passed) == (2, True)
    assert failed.feedback.endswith("Failed: no")
