"""Messages that are true (issue 38): what a failed check says happened is what happened.

A module that lacks a weight is told so, on the checks that weight breaks, and not that its
code raised; no "Expected: [nan] / Got: [nan]" under a line that rightly names the student's
NaN; an entry named as off prints differently on the Expected and Got lines; a bare ``assert``
reads "AssertionError (at ...)"; torch's advice to run anomaly mode, which the kit already ran,
is left out; and a count of one takes the singular. The messages the student reads are quoted.
"""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest
from submission_tools import KIT
from test_true_feedback import IN_PLACE_EXP, key_with, line_of, run_checks
from zoo.catalog import BY_NAME

from grader.core.assertions import CheckFailed, assert_close, assert_equal
from grader.core.engine import CheckResult, ExerciseResult, SubmissionResult
from grader.integrations import exports, gradescope, report


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
    from grader.integrations import handout, notebook

    course_file = tmp_path / "course.toml"
    course_file.write_text("".join(
        f"[exercises.{name}]\n" + ("points = 1\n" if name == "softmax" else "enabled = false\n")
        for name in EXERCISES_BY_NAME()))
    course = load(course_file)
    assert "You implement 1 file in `exercises/`" in handout.readme(course)
    text = json.dumps(notebook.notebook(course=course))
    assert "1 exercise, 1 point." in text and "## 1. `softmax` (1 point)" in text
