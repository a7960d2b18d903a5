"""Feedback true to what real students write (issue 23): a check fails for the reason its
property states, a float32 computation loses the same points whatever the examples, a torch
error points at the student's line, and no message contradicts itself.

Each test runs only the checks it is about, in one worker, with the student file in the test:
the messages a student reads are quoted. The bias mistake is a zoo entry
(``tests/zoo/wrong/mha_bias_unused.patch``; its tests are in test_zoo.py).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
from submission_tools import EXERCISES, SOLUTIONS

from grader.core.assertions import CheckFailed, assert_close
from grader.core.course import load
from grader.core.engine import copy_submission, run_check
from grader.core.exercise import Context
from grader.core.student import Student
from grader.sandbox.isolation import Sandbox

COURSE = load()


def run_checks(exercise: str, source: str, names: list[str]) -> dict:
    """Each of ``names`` (checks of ``exercise``) run on ``source`` as that exercise's file,
    in one worker, as the engine runs them: {name: CheckResult}."""
    with tempfile.TemporaryDirectory(prefix="true-feedback-") as tmp:
        os.chmod(tmp, 0o755)  # the worker may run as an unprivileged user
        staged, folder = Path(tmp) / "staged", Path(tmp) / "submission"
        staged.mkdir()
        folder.mkdir()
        (staged / f"{exercise}.py").write_text(source)
        copy_submission(staged, folder)
        ex = EXERCISES[exercise]
        framework = ex.framework
        with Sandbox(folder, exercise, framework=framework) as sandbox:
            student = Student(sandbox, ex)
            student.load()
            ctx = Context(student, None, ("cpu",))
            points = COURSE.check_points(ex)
            return {c.name: run_check(c, ctx, COURSE, points[c.name])
                    for c in ex.checks if c.name in names}


def key_with(exercise: str, *replacements: tuple[str, str]) -> str:
    text = (SOLUTIONS / f"{exercise}.py").read_text()
    for old, new in replacements:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


# -- 2. a float32 computation gets a certain verdict -------------------------------------------
KEY_SOFTMAX_BODY = (
    "    shifted = converted - np.max(converted, axis=axis, keepdims=True)\n"
    "    weights = np.exp(shifted)\n"
    "    return weights / np.sum(weights, axis=axis, keepdims=True)\n")
# A real student's softmax: float32 inside, the result cast back to the input's dtype.
SOFTMAX_FLOAT32_INSIDE = key_with("softmax", (KEY_SOFTMAX_BODY, (
    "    work = converted.astype(np.float32)\n"
    "    shifted = work - np.max(work, axis=axis, keepdims=True)\n"
    "    weights = np.exp(shifted)\n"
    "    return (weights / np.sum(weights, axis=axis, keepdims=True)).astype(dtype)\n")))


def test_a_float32_softmax_fails_the_torch_comparison_and_only_for_precision():
    """It passed "matches torch.softmax" on the drawn examples by luck, and lost the point of
    "-inf entries get exactly zero" on logits with no -inf, for precision."""
    results = run_checks("softmax", SOFTMAX_FLOAT32_INSIDE,
                         ["test_matches_torch_softmax", "test_exact_zeros_at_neg_inf"])
    matches = results["test_matches_torch_softmax"]
    assert not matches.passed
    assert "It agrees to float32 precision: part of the computation ran in float32? Keep " \
           "float64 input in float64 throughout." in matches.feedback
    assert results["test_exact_zeros_at_neg_inf"].passed, results[
        "test_exact_zeros_at_neg_inf"].feedback


def float32_throughout(x):
    w = np.exp(x.astype(np.float32) - x.astype(np.float32).max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)).astype(np.float64)


def float32_exp(x):
    w = np.exp((x - x.max(-1, keepdims=True)).astype(np.float32)).astype(np.float64)
    return w / w.sum(-1, keepdims=True)


def float32_division(x):
    w = np.exp(x - x.max(-1, keepdims=True))
    return (w.astype(np.float32) / w.sum(-1, keepdims=True).astype(np.float32)).astype(np.float64)


def float32_input(x):
    y = x.astype(np.float32).astype(np.float64)
    w = np.exp(y - y.max(-1, keepdims=True))
    return w / w.sum(-1, keepdims=True)


@pytest.mark.parametrize("variant", [float32_throughout, float32_exp, float32_division,
                                     float32_input])
def test_every_float32_variant_fails_on_the_float32_visible_logits(variant):
    from grader.problems.softmax import FLOAT32_VISIBLE, torch_softmax

    logits = FLOAT32_VISIBLE.logits
    with pytest.raises(CheckFailed, match="It agrees to float32 precision"):
        assert_close(variant(logits), torch_softmax(logits, -1), rounding=True)


def softmax_by_logsumexp(x):
    top = x.max(-1, keepdims=True)
    return np.exp(x - (top + np.log(np.exp(x - top).sum(-1, keepdims=True))))


def softmax_by_reciprocal(x):
    w = np.exp(x - x.max(-1, keepdims=True))
    return w * (1.0 / w.sum(-1, keepdims=True))


def softmax_in_long_double(x):
    y = x.astype(np.longdouble)
    w = np.exp(y - y.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)).astype(np.float64)


def softmax_unshifted(x):
    w = np.exp(x)
    return w / w.sum(-1, keepdims=True)


def softmax_by_differences(x):  # 1 / sum_j exp(x_j - x_i), one entry at a time
    return 1.0 / np.exp(x[..., None, :] - x[..., :, None]).sum(-1)


@pytest.mark.parametrize("variant", [softmax_by_logsumexp, softmax_by_reciprocal,
                                     softmax_in_long_double, softmax_unshifted,
                                     softmax_by_differences])
def test_every_float64_formulation_passes_at_rounding_tolerance(variant):
    """The bound the rounding tolerance rests on: logits in [-10, 10] (the drawn range, on any
    grid), slices of up to 4; the extreme gaps and every way to write it in float64."""
    from grader.problems.softmax import FLOAT32_VISIBLE, torch_softmax

    rng = np.random.default_rng(23)
    cases = [rng.uniform(-10, 10, size=(200, n)) for n in (1, 2, 3, 4)]
    cases += [np.array([[10.0, -10.0], [-10.0, 10.0], [10.0, 10.0]]),
              np.array([[9.999999999, -9.999999999, 0.1, -0.1]]), FLOAT32_VISIBLE.logits]
    for logits in cases:
        assert_close(variant(logits), torch_softmax(logits, -1), rounding=True)


# -- 3. torch errors at the student's line ------------------------------------------------------
MHA_SOFTMAX = "        weights = torch.softmax(scores, dim=-1)\n"
IN_PLACE_EXP = key_with("mha", (MHA_SOFTMAX, (
    "        scores = scores - scores.amax(dim=-1, keepdim=True)\n"
    "        weights = scores.exp_()\n"
    "        weights /= weights.sum(dim=-1, keepdim=True)\n")))
BROADCAST = key_with("mha", ('            scores = scores.masked_fill(mask, float("-inf"))\n', (
    '            add_mask = torch.zeros(mask.shape).masked_fill(mask, float("-inf"))\n'
    "            q_times_k = scores\n"
    "            q_times_k += add_mask.unsqueeze(1)\n")))


def test_a_torch_error_in_the_backward_pass_points_at_the_students_line():
    """An in-place exp_() whose result autograd needed: torch raises in the backward pass,
    where no line of the student's runs; the report points at the forward line that made the
    tensor, not at the grader's operation."""
    check = "test_gradients_match_torch"
    feedback = run_checks("mha", IN_PLACE_EXP, [check])[check].feedback
    line = line_of(IN_PLACE_EXP, "weights = scores.exp_()")
    assert "your code raised RuntimeError: one of the variables needed for gradient " \
           "computation has been modified by an inplace operation" in feedback
    assert "<operation" not in feedback and "<sandbox" not in feedback
    assert f"(in the backward pass of mha.py line {line}, in forward: weights = " \
           "scores.exp_())" in feedback


def test_a_torch_error_in_the_forward_pass_points_at_the_students_line():
    check = "test_matches_torch_multihead_attention"
    feedback = run_checks("mha", BROADCAST, [check])[check].feedback
    line = line_of(BROADCAST, "q_times_k += add_mask")
    assert re.search(r"your code raised RuntimeError: output with shape \[[\d, ]+\] doesn't "
                     r"match the broadcast shape", feedback)
    assert f"(at mha.py line {line}, in forward: q_times_k += add_mask.unsqueeze(1))" in feedback


# -- 4. messages that say what happened --------------------------------------------------------
def test_a_nan_compared_with_a_nan_is_named_as_the_bug():
    message = str(pytest.raises(CheckFailed, assert_close, np.array([[np.nan, 0.5]]),
                                np.array([[np.nan, 0.5]]), what="softmax(logits + c)").value)
    assert "expected nan" not in message
    assert "softmax(logits + c): got nan at index (0, 0), where a number is due: the value " \
           "it is compared with is NaN as well (1 of 2 entries off)" in message


def test_a_gradient_that_never_reached_a_weight_is_named():
    """wo's weight used through .data: autograd never sees it, and its .grad stays None."""
    source = key_with("mha", ("        return self.wo(y), weights\n",
                              "        return y @ self.wo.weight.data.T, weights\n"))
    check = "test_gradients_match_torch"
    feedback = run_checks("mha", source, [check])[check].feedback
    assert "Failed: no gradient reached wo.weight on cpu: its .grad is None after backward, " \
           "so autograd never saw it used (left out, or used through .data, .detach() or " \
           "torch.no_grad())" in feedback
    assert "got 0" not in feedback and "(float32" not in feedback


def test_an_error_far_below_float32_rounding_is_not_called_float32():
    """An epsilon added to every probability (1e-12) misses float64 rounding, but nothing of
    it ran in float32: the report does not say it did."""
    expected = np.array([0.25, 0.75])
    message = str(pytest.raises(CheckFailed, assert_close, (expected + 1e-12) / (1 + 2e-12),
                                expected, rounding=True).value)
    assert "the float64 tolerance allows |got - expected| <= 1e-15 + 1e-12 * |expected| " \
           "(float64 rounding: this computation needs no more)" in message
    assert "float32" not in message
