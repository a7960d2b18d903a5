"""What a report shows under a failing check: inputs each under its own name, and hints earned
by the example they are printed under."""

from __future__ import annotations

import numpy as np
import pytest
from submission_tools import make_submission
from zoo.catalog import KEY

from grader.core.diagnose import feedback_line
from grader.core.engine import _inputs, grade_submission
from grader.core.exercise import Context
from grader.problems.masks import Padding, Window


def test_every_input_carries_its_own_name():
    """masks' answer-key comparison draws two cases that both have a `t`: each is shown under
    its parameter's name, not as two `t`s."""
    ctx = Context(None)
    ctx.example = {"window": Window(2, 1), "padding": Padding(np.array([1]), 1)}
    assert _inputs(ctx) == "window (t 2, window 1), padding (lengths [1] (int64), t 1)"
    ctx.example = {"case": Padding(np.array([2, 1]), 3), "causal": True}
    assert _inputs(ctx) == "lengths [2, 1] (int64), t 3, causal True"  # no clash: as before


# -- hints earned by their example: small student files, each making one real program's mistakes
def grade(tmp_path, exercise: str, files: dict[str, str]):
    """Grade ``files`` (over a copy of the key) on ``exercise``: its ExerciseResult by check."""
    submission = make_submission(tmp_path / "submission", files)
    result = grade_submission(submission, exercises=[exercise]).results[exercise]
    return result, {c.name: c for c in result.checks}


# The key's attention without the check for a query with no allowed key, its blocked scores
# at -1e9 (a fully masked row comes out uniform: fully-masked-row), and one more change each.
ATTENTION = (KEY / "attention.py").read_text().replace(
    '    if np.any(np.all(np.isneginf(scores), axis=-1)):\n'
    '        raise ValueError("a query has no allowed key: its whole mask row is True")\n', ""
).replace("scores = np.where(mask, -np.inf, scores)", "scores = np.where(mask, -1e9, scores)")
SCORES = "scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)"
HIDDEN = "test_attention_matches_answer_key"


@pytest.mark.parametrize("scores, shown", [
    # k.T: right on one (T, d) pair, an exception on batched input
    ("scores = q @ k.T / np.sqrt(d_k)", "your code raised ValueError"),
    # the scores in float32: float64 results right to float32 precision only
    ("scores = (q.astype(np.float32) @ np.swapaxes(k, -1, -2).astype(np.float32)"
     " / np.float32(np.sqrt(d_k))).astype(q.dtype)", "agrees to float32 precision"),
    # scaled by the width of v: the hidden example shows that mistake, not the other
    ("scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])", feedback_line("scale-by-d-v")),
], ids=["k.T on batched input", "float32 precision", "scale by sqrt(d_v)"])
def test_a_hidden_comparison_carries_only_the_hints_its_example_shows(tmp_path, scores, shown):
    assert ATTENTION.count(SCORES) == 1
    result, checks = grade(tmp_path, "attention", {"attention.py": ATTENTION.replace(
        SCORES, scores)})
    assert "fully-masked-row" in result.misconceptions
    hidden = checks[HIDDEN].feedback
    assert not checks[HIDDEN].passed and "mask None" in hidden and shown in hidden
    assert feedback_line("fully-masked-row") not in hidden
    rejects = checks["test_rejects_query_with_no_allowed_key"]  # its example has such a row
    assert feedback_line("fully-masked-row") in rejects.feedback


ROPE_HALF_IN_FLOAT32 = '''
    import numpy as np


    def rotary_embedding(x, positions, base=10000.0):
        """Llama's "rotate half" layout, computed in float32."""
        x, positions = np.asarray(x), np.asarray(positions)
        if x.dtype.kind not in "iuf" or x.ndim < 2 or x.shape[-1] % 2 or x.shape[-1] == 0:
            raise ValueError("x must be (..., T, d), d even")
        if positions.dtype.kind not in "iu" or positions.shape != x.shape[-2:-1]:
            raise ValueError("positions must be T integers")
        if isinstance(base, bool) or not np.isfinite(base) or base <= 0:
            raise ValueError("the base must be finite and positive")
        d = x.shape[-1]
        inv = (1.0 / base ** (np.arange(0, d, 2, dtype=np.float32) / d)).astype(np.float32)
        angles = positions.astype(np.float32)[:, None] * inv[None, :]
        cos = np.concatenate([np.cos(angles)] * 2, axis=-1)
        sin = np.concatenate([np.sin(angles)] * 2, axis=-1)
        x32 = x.astype(np.float32)
        turned = np.concatenate([-x32[..., d // 2:], x32[..., : d // 2]], axis=-1)
        return (x32 * cos + turned * sin).astype(x.dtype if x.dtype.kind == "f" else np.float64)
'''


def test_an_example_too_small_to_show_the_mistake_gets_the_probes_input_beside_it(tmp_path):
    """At d = 2 the two layouts are one rotation: the smallest failing example fails on float32
    precision. The check the probe names carries the hint with the probe's input (d = 6) that
    shows it; the hidden comparison, on the same d = 2 example, carries none."""
    result, checks = grade(tmp_path, "rope", {"rope.py": ROPE_HALF_IN_FLOAT32})
    assert result.misconceptions == ["rope-half-split"]
    hint = feedback_line("rope-half-split")
    matches = checks["test_matches_torch_roformer"].feedback
    assert "Smallest failing input: x [[2.125, 0.875]]" in matches  # d = 2
    assert hint in matches
    assert "The mistake shows on the probe's input (rotary_embedding): x [[[1.0806" in matches
    assert "(float64, shape (2, 3, 6)), positions [7, 4, 9] (int64)" in matches
    assert hint in checks["test_known_rotations"].feedback  # d = 4 shows it: no probe input
    assert "probe's input" not in checks["test_known_rotations"].feedback
    assert hint not in checks["test_rope_matches_answer_key"].feedback


SOFTMAX_1D = '''
    import numpy as np


    def softmax(logits, axis=-1):
        x = np.asarray(logits, dtype=np.float64)
        if np.isnan(x).any() or np.isposinf(x).any():
            raise ValueError("NaN or +inf")
        x = np.moveaxis(x, axis, 1)  # AxisError on 1-D input
        e = np.exp(x)  # no shift: overflows for large logits
        return np.moveaxis(e / e.sum(axis=1, keepdims=True), 1, axis)
'''


def test_an_exception_carries_no_hint_of_a_mistake_found_elsewhere(tmp_path):
    """softmax-overflow is found, and shown where the logits overflow; the 1-D example of the
    same check family fails with AxisError, which says nothing of overflow."""
    result, checks = grade(tmp_path, "softmax", {"softmax.py": SOFTMAX_1D})
    assert "softmax-overflow" in result.misconceptions
    hint = feedback_line("softmax-overflow")
    huge = checks["test_stable_for_huge_logits"].feedback
    assert "your code raised AxisError" in huge and "logits [1000, 1000] (float64)" in huge
    assert hint not in huge
    assert hint in checks["test_stable_for_slices_of_different_magnitude"].feedback
    assert hint not in checks["test_softmax_matches_answer_key"].feedback
