"""Messages that are true (issue 38): what a failed check says happened is what happened.

A module that lacks a weight is told so, on the checks that weight breaks, and not that its
code raised; no "Expected: [nan] / Got: [nan]" under a line that rightly names the student's
NaN; an entry named as off prints differently on the Expected and Got lines; a bare ``assert``
reads "AssertionError (at ...)"; torch's advice to run anomaly mode, which the kit already ran,
is left out; and a count of one takes the singular. The messages the student reads are quoted.
"""

from __future__ import annotations

from test_true_feedback import IN_PLACE_EXP, key_with, line_of, run_checks


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
