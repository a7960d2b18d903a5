"""Messages that are true (issue 38): what a failed check says happened is what happened.

A module that lacks a weight is told so, on the checks that weight breaks, and not that its
code raised; no "Expected: [nan] / Got: [nan]" under a line that rightly names the student's
NaN; an entry named as off prints differently on the Expected and Got lines; a bare ``assert``
reads "AssertionError (at ...)"; torch's advice to run anomaly mode, which the kit already ran,
is left out; and a count of one takes the singular. Issue 47: every line true to the example
beside it (a property's text, the window's count, a tuple's parts, the label of an example no
shrinking made, every argument of the call shown). The messages the student reads are quoted.
"""

from __future__ import annotations

import ast
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
from submission_tools import EXERCISES, KIT, SOLUTIONS
from test_true_feedback import COURSE, IN_PLACE_EXP, key_with, line_of, run_checks
from zoo.catalog import BY_NAME, build

from grader.core.answer_key import AnswerKey
from grader.core.assertions import CheckFailed, assert_close, assert_equal, assert_matches_key
from grader.core.engine import (
    CheckResult,
    ExerciseResult,
    SubmissionResult,
    copy_submission,
    grade_submission,
    run_check,
)
from grader.core.exercise import Context
from grader.core.student import Student
from grader.integrations.outputs import exports, report
from grader.integrations.routes import gradescope
from grader.sandbox.isolation import Sandbox


# -- a module that lacks a weight ---------------------------------------------------------------
def test_a_projection_without_its_bias_costs_only_the_checks_it_breaks(tmp_path):
    """``self.wo = nn.Linear(d_model, d_model, bias=False)`` whatever ``bias`` asks scored 2/25:
    permutation, causality, rows summing to one and the per-head mask, which no bias can
    break, each said "your code raised BadReturn: wo.bias is missing or has another shape than
    (1,)", and no mistake was named. It loses the checks that need the bias (the layers, the
    parameter count, the comparisons with nn.MultiheadAttention and the key), each says what
    the module lacks, and the mistake is named."""
    entry = BY_NAME["mha_output_bias_missing"]
    graded = grade_submission(build(entry, tmp_path), exercises=["mha"]).results["mha"]
    failed = {c.name: c.feedback for c in graded.checks if not c.passed}
    assert graded.score == 10 and graded.misconceptions == ["projection-bias-missing"]
    assert set(failed) == {"test_has_four_linear_projections",
                           "test_parameter_count_independent_of_heads",
                           "test_matches_torch_multihead_attention", "test_gradients_match_torch",
                           "test_mha_matches_answer_key"}
    lacks = ("Failed: MultiHeadAttention(1, 1, bias=True) has no wo.bias, so this example's "
             "weights cannot be loaded into it")
    for name in ("test_matches_torch_multihead_attention", "test_gradients_match_torch",
                 "test_mha_matches_answer_key"):
        assert lacks in failed[name]
    assert "Failed: self.wo is Linear(6, 6, bias=False), expected Linear(6, 6, bias=True)" in \
        failed["test_has_four_linear_projections"]
    assert "Failed: 612 parameters with n_head=1, expected 624" in \
        failed["test_parameter_count_independent_of_heads"]
    hint = ("Likely mistake (projection-bias-missing): with bias=True every projection has a "
            "bias: build each of wq, wk, wv and wo as nn.Linear(d_model, d_model, bias=bias).")
    assert all(hint in text for text in failed.values())
    assert not any("BadReturn" in c.feedback or "raised" in c.feedback for c in graded.checks)


def test_weights_of_another_shape_are_named_not_raised():
    """Projections that grow with the heads: every check that loads the example's weights said
    "your code raised BadReturn: wq.weight is missing or has another shape than (2, 2)"."""
    source = BY_NAME["mha_params_grow"].source()
    check = "test_token_permutation_equivariance"
    feedback = run_checks("mha", source, [check])[check].feedback
    assert "Failed: MultiHeadAttention(2, 2, bias=False) has weights of other shapes than this " \
           "example's (wq.weight (4, 2) for (2, 2), wk.weight (4, 2) for (2, 2), wv.weight " \
           "(4, 2) for (2, 2), wo.weight (2, 4) for (2, 2)), so this example's weights cannot " \
           "be loaded into it" in feedback
    assert "raised" not in feedback


# A module with no projections at all, which returns its input and uniform weights: it meets
# permutation, causality and rows summing to one whatever it is given. Were the checks to run a
# module without the weights it lacks (as they run one without a bias it lacks), it would take
# their 6 points, and those checks' calls, none of which it could then answer with weights it
# has, would show nothing of whether it uses its input.
WEIGHTLESS = """\
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, bias=False):
        super().__init__()
        self.n_head = n_head

    def forward(self, x, mask=None):
        b, t, _ = x.shape
        return x.clone(), torch.full((b, self.n_head, t, t), 1.0 / t, dtype=x.dtype)
"""


def test_a_module_without_its_projections_gets_no_property_points():
    checks = ["test_token_permutation_equivariance",
              "test_causal_later_token_never_changes_earlier_output",
              "test_weights_per_head_rows_sum_to_one"]
    results = run_checks("mha", WEIGHTLESS, checks)
    for name in checks:
        assert not results[name].passed, name
        assert "has no wq.weight, wk.weight, wv.weight or wo.weight, so this example's " \
               "weights cannot be loaded into it" in results[name].feedback


# -- the values printed ---------------------------------------------------------------------------
def test_a_nan_beside_the_students_own_nan_prints_no_expected_value():
    """A softmax with no exp() gives 0 / 0 for the logits [0]; the shift check compares it with
    its own answer, NaN as well: the line names the NaN, and no "Expected: [nan] (float64)"
    claims that NaN was what the grader expected."""
    source = BY_NAME["softmax_no_exp"].source()
    check = "test_invariant_to_adding_a_constant"
    feedback = run_checks("softmax", source, [check])[check].feedback
    assert "Failed: softmax(logits + c): got nan at index (0,), where a number is due: the " \
           "value it is compared with is NaN as well (1 of 1 entry off)" in feedback
    assert "Expected:" not in feedback and "Got:" not in feedback
    message = str(pytest.raises(CheckFailed, assert_close, np.array([0.5, 0.5]),
                                np.array([np.nan, 0.5]), what="softmax(logits + c)").value)
    assert "got 0.5 at index (0,), where the value it is compared with is NaN, and a number " \
           "is due (1 of 2 entries off)" in message
    assert "expected nan" not in message


def test_every_entry_named_as_off_prints_differently():
    """An epsilon in the denominator: the entry named as off printed as "0.105506228523" on
    both the Expected and the Got line (another entry, within the tolerance, set the digits)."""
    source = BY_NAME["softmax_epsilon"].source()
    check = "test_matches_torch_softmax"
    feedback = run_checks("softmax", source, [check])[check].feedback
    assert "Failed: the result: got 0.1055062285233 at index (1, 2), expected 0.1055062285229 " \
           "(2 of 6 entries off)" in feedback
    expected = re.search(r"^Expected: \[\[.*, (\S+)\]\] \(float64", feedback, re.M)[1]
    got = re.search(r"^Got:      \[\[.*, (\S+)\]\] \(float64", feedback, re.M)[1]
    assert (expected, got) == ("0.1055062285229", "0.1055062285233")


def test_the_largest_error_is_that_of_an_entry_off():
    """1e-10 against 2e-10 is within atol, 100% relative: it is no error the tolerance counts,
    and the line about the tolerance quoted it."""
    message = str(pytest.raises(CheckFailed, assert_close, np.array([2e-10, 1.000001]),
                                np.array([1e-10, 1.0])).value)
    assert "Largest error 1e-06 absolute, 1e-06 relative" in message


# -- what the student's code raised -----------------------------------------------------------
def test_an_assert_without_a_message_reads_without_a_doubled_space():
    last = "    return weights / np.sum(weights, axis=axis, keepdims=True)\n"
    source = key_with("softmax", (last, "    assert weights.ndim < 2\n" + last))
    check = "test_matches_torch_softmax"
    feedback = run_checks("softmax", source, [check])[check].feedback
    line = line_of(source, "assert weights.ndim < 2")
    assert f"Failed: your code raised AssertionError (at softmax.py line {line}, in softmax: " \
           "assert weights.ndim < 2)" in feedback


def test_torch_advice_to_run_anomaly_mode_is_left_out():
    """The kit ran the forward pass again under anomaly mode to find the line; torch's "Hint:
    enable anomaly detection ... with torch.autograd.set_detect_anomaly(True, check_nan=False)."
    asked the student to do what was done, in a worker whose output they never see."""
    check = "test_gradients_match_torch"
    feedback = run_checks("mha", IN_PLACE_EXP, [check])[check].feedback
    line = line_of(IN_PLACE_EXP, "weights = scores.exp_()")
    assert "anomaly" not in feedback and "Hint:" not in feedback
    assert "is at version 2; expected version 1 instead. (in the backward pass of mha.py line " \
           f"{line}, in forward: weights = scores.exp_())" in feedback


# -- a count of one ---------------------------------------------------------------------------
def _one_check(passed: bool, hidden: bool = False) -> ExerciseResult:
    check = CheckResult("softmax", "test_rows", "Rows sum to 1.", 0 if hidden else 1, 1, hidden,
                        passed, "" if passed else "Failed: no")
    return ExerciseResult("softmax", 1, checks=[check])


def test_a_count_of_one_takes_the_singular():
    assert report.status(_one_check(False)) == "1 check failing"
    result = SubmissionResult("s", {"softmax": _one_check(True)}, key_present=False,
                              hidden_points_skipped=1)
    assert "1 more point comes from hidden checks your instructor runs." in report.render(result)
    hidden = SubmissionResult("s", {"softmax": _one_check(False, hidden=True)}, True)
    assert gradescope.visible_summary(hidden) == (
        "Visible checks: 0 / 0 points. 1 more point comes from checks shown when grades are "
        "published.")
    assert exports.issue_lines({"not_in_roster": ["ann"], "no_submission": ["bob"]}) == [
        "1 submission folder not in the roster (exported without an id): ann",
        "1 roster entry without a submission (exported with a blank score): bob"]
    assert "(1 of 1 entry off)" in str(pytest.raises(
        CheckFailed, assert_close, np.array([1.0]), np.array([0.0])).value)
    assert "(1 of 2 entries differs)" in str(pytest.raises(
        CheckFailed, assert_equal, np.array([True, True]), np.array([True, False])).value)


HAND_MADE_PLURAL = re.compile(r"[a-z]\((?:s|es|y/ies|ies)\)")


def test_no_plural_is_built_by_hand():
    """No text the kit writes says "check(s)" or "entr(y/ies)": a count's noun is chosen
    (``grader.core.plural``)."""
    found = []
    for path in sorted((KIT / "grader").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    HAND_MADE_PLURAL.search(node.value) and not _docstring(tree, node):
                found.append(f"{path.relative_to(KIT)}:{node.lineno}: {node.value.strip()[:60]}")
    assert found == []


def _docstring(tree: ast.AST, constant: ast.Constant) -> bool:
    return any(isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
               and ast.get_docstring(node, clean=False) == constant.value
               for node in ast.walk(tree))


def test_the_handout_and_notebook_count_their_exercises_and_points(tmp_path):
    """A course of one exercise worth one point: "1 exercise, 1 point", not "1 exercises, 1
    points"."""
    import json

    from grader.core.course import EXERCISES_BY_NAME, load
    from grader.integrations.routes import handout, notebook

    course_file = tmp_path / "course.toml"
    course_file.write_text("".join(
        f"[exercises.{name}]\n" + ("points = 1\n" if name == "softmax" else "enabled = false\n")
        for name in EXERCISES_BY_NAME()))
    course = load(course_file)
    assert "You implement 1 file in `exercises/`" in handout.readme(course)
    text = json.dumps(notebook.notebook(course=course))
    assert "1 exercise, 1 point (0.93 from the test cells" in text
    assert "## 1. `softmax` (1 point, 0.07 of them from hidden checks)" in text


# -- an answer the kit cannot use is no exception ------------------------------------------------
def test_an_answer_that_cannot_be_used_is_not_said_to_be_raised():
    """A softmax that returns None raised nothing: the check read "your code raised BadReturn:
    what softmax returned is a NoneType, expected a NumPy array"."""
    source = "def softmax(logits, axis=-1):\n    return None\n"
    check = "test_slices_sum_to_one"
    feedback = run_checks("softmax", source, [check])[check].feedback
    assert "Failed: what your code returned could not be used: what softmax returned is a " \
           "NoneType, expected a NumPy array" in feedback
    assert "raised" not in feedback and "BadReturn" not in feedback


def test_a_grouped_module_whose_weights_do_not_fit_is_told_so():
    """A GroupedQueryAttention whose keys keep the full width (tests/zoo/wrong/
    gqa_full_width_kv.py) read "your code raised BadReturn: wk.weight is missing or has another
    shape than (1, 2)" on every check that loads an example's weights; its code raised nothing."""
    check = "test_multi_query_when_one_kv_head"
    feedback = run_checks("gqa", BY_NAME["gqa_full_width_kv"].source(), [check])[check].feedback
    assert "Failed: this example's weights could not be loaded into the module: wk.weight is " \
           "missing or has another shape than (1, 2)" in feedback
    assert "raised" not in feedback and "BadReturn" not in feedback


# -- every line true to the example beside it (issue 47) -------------------------------------
def run_checks_with_key(exercise: str, source: str, names: list[str]) -> dict:
    """``run_checks``, the hidden checks among them (``ctx.key``: the answer key)."""
    with tempfile.TemporaryDirectory(prefix="true-messages-") as tmp:
        os.chmod(tmp, 0o755)  # the worker may run as an unprivileged user
        staged, folder = Path(tmp) / "staged", Path(tmp) / "submission"
        staged.mkdir()
        folder.mkdir()
        (staged / f"{exercise}.py").write_text(source)
        copy_submission(staged, folder)
        ex = EXERCISES[exercise]
        with Sandbox(folder, exercise, framework=ex.framework) as sandbox:
            student = Student(sandbox, ex)
            student.load()
            ctx = Context(student, AnswerKey(SOLUTIONS, ex), ("cpu",))
            points = COURSE.check_points(ex)
            return {c.name: run_check(c, ctx, COURSE, points[c.name])
                    for c in ex.checks if c.name in names}


def test_the_huge_logits_property_describes_the_example_it_shows():
    """A softmax along the wrong axis read "Property: Huge logits do not overflow: [1000, 1000]
    gives [0.5, 0.5]." above the logits [[1000, 1000]] along axis 0, expected [[1, 1]]: the
    property named an example other than the one shown, whose answer it contradicted."""
    check = "test_stable_for_huge_logits"
    source = BY_NAME["softmax_wrong_axis"].source()
    feedback = run_checks("softmax", source, [check])[check].feedback
    assert feedback.splitlines()[0] == (
        "Property: Huge logits do not overflow: logits moved up by 1000 or 10000, or down by "
        "1000, give what the same logits give unmoved.")
    assert "Smallest failing input: logits [[1000, 1000]] (float64, shape (1, 2)), axis 0\n" \
           "Expected: [[1, 1]] (float64, shape (1, 2))" in feedback
    assert "[0.5, 0.5]" not in feedback.splitlines()[0]


def test_no_property_names_an_example():
    """A property holds for every example its check draws: its text names none (the huge
    logits and the slices 1000 apart each named a fixed example, and then showed a drawn one
    beside the words)."""
    literal = re.compile(r"\[\[?-?\d")  # an array written out: [1000, or [[1000,
    named = [f"{name}.{check.name}: {check.prop}" for name, ex in EXERCISES.items()
             for check in ex.checks if literal.search(check.prop) and check.is_property]
    assert named == []


def test_the_window_count_speaks_of_the_rows_shown():
    """"row 1 allows 2 keys, expected min(i + 1, window) = 1: keys 1..1" stood above the mask's
    rows, whose True entries are the keys blocked: the words counted what the arrays did not
    show. The words now name the blocked keys, as the arrays mark them."""
    check = "test_each_row_allows_the_most_recent_keys"
    feedback = run_checks("masks", BY_NAME["window_off_by_one"].source(), [check])[check].feedback
    assert "Failed: row 1 blocks no key, expected key 0: row i allows the min(i + 1, window) = " \
           "1 most recent key, key 1, and blocks every other\n" \
           "Smallest failing input: t 2, window 1\n" \
           "Expected: [True, False] (bool)\n" \
           "Got:      [False, False] (bool)" in feedback


def test_a_part_of_a_tuple_is_named():
    """The hidden comparison with the key read "Failed: (output, weights) [1]: got 0.00198777
    at index (0, 1), expected 0.0121606": the weights, by their index."""
    check = "test_attention_matches_answer_key"
    feedback = run_checks_with_key("attention", BY_NAME["attention_scale_missing"].source(),
                                   [check])[check].feedback
    assert "Failed: the weights: got 0.00198777 at index (0, 1), expected 0.0121606 (2 of 2 " \
           "entries off)" in feedback
    assert "[1]" not in feedback and "(output, weights)" not in feedback
    message = str(pytest.raises(CheckFailed, assert_matches_key, (np.zeros(2), np.ones(1)),
                                (np.zeros(2), np.zeros(1)), what="(dq, dk)").value)
    assert message.startswith("part 2 of 2 of (dq, dk): got 1")  # unnamed: its place in words


def test_an_example_no_shrinking_made_is_not_called_the_smallest():
    """A plain check's example, and a fixed one inside a property, read "Smallest failing input"
    though nothing had shrunk them: "Failing input"."""
    feedback = run_checks("softmax", BY_NAME["softmax_always_float64"].source(),
                          ["test_result_dtype"])["test_result_dtype"].feedback
    assert "Failed: the result has dtype float64, expected float32\n" \
           "Failing input: logits [1, 2] (float32)" in feedback
    check = "test_stable_for_huge_logits"
    feedback = run_checks("softmax", BY_NAME["softmax_overflow"].source(), [check])[check].feedback
    assert "Failing input: logits [1000, 1000] (float64), axis -1\n" \
           "Expected: [0.5, 0.5] (float64)" in feedback
    assert "Smallest" not in feedback


def test_a_rejected_call_shows_every_argument_it_had():
    """attention_backward's bad-input check showed "q [[[1, 1], ...]] (float64, shape (2, 2,
    2)), grad_output [[[1, 1], [1, 1]]] (float64, shape (1, 2, 2))" for the call
    attention_backward(q, k, v, grad_output): no k, no v, nothing to paste back."""
    source = key_with("attention_backward", (
        '    if g.shape != (*q.shape[:-1], v.shape[-1]):\n'
        '        raise ValueError(f"grad_output has shape {g.shape}, expected the output\'s "\n'
        '                         f"{(*q.shape[:-1], v.shape[-1])}")\n', ""))
    check = "test_rejects_bad_inputs"
    feedback = run_checks("attention_backward", source, [check])[check].feedback
    ones = "[[[1, 1], [1, 1]], [[1, 1], [1, 1]]] (float64, shape (2, 2, 2))"
    assert f"Failing input: q {ones}, k {ones}, v {ones}, grad_output [[[1, 1], [1, 1]]] " \
           "(float64, shape (1, 2, 2))" in feedback
