"""What a report shows under a failing check: inputs each under its own name, and hints earned
by the example they are printed under."""

from __future__ import annotations

import numpy as np
import pytest
from submission_tools import EXERCISES, make_submission
from zoo.catalog import KEY

from grader.core.diagnose import (
    DOES_NOT_SHOW,
    SHOWS,
    answering,
    earned,
    feedback_line,
    hint_checks,
)
from grader.core.engine import CheckResult, _inputs, grade_submission
from grader.core.exercise import Context
from grader.problems.masks import Padding, Window
from grader.sandbox.errors import StudentError


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


# -- every probe's mistaken version: what earns its hint ----------------------------------------
class Answering:
    """A stand-in student, answered here: each function and operation of ``exercise`` by
    ``answer(name)`` (a callable), its calls noted as the proxy notes them (an operation's
    arguments by name; a raise as the StudentError the proxy raises)."""

    def __init__(self, exercise, answer):
        self._exercise, self._answer, self.calls = exercise, answer, []

    def __getattr__(self, name):
        operation = self._exercise.operations.get(name)
        if name not in self._exercise.functions and operation is None:
            raise AttributeError(name)

        def call(*args, **kwargs):
            if operation is not None:
                params = operation.__code__.co_varnames[1:operation.__code__.co_argcount]
                kwargs, args = {**kwargs, **dict(zip(params, args))}, ()
            try:
                reply = self._answer(name)(*args, **kwargs)
            except Exception as error:
                raised = StudentError({"type": type(error).__name__, "message": str(error),
                                       "value_error": isinstance(error, ValueError)})
                self.calls.append((name, args, kwargs, raised))
                raise raised from None
            self.calls.append((name, args, kwargs, reply))
            return reply

        return call


PROBES = [(exercise, m, probe) for exercise in EXERCISES.values() for m, probe in exercise.probes]


def as_mistaken(exercise, misconception, which):
    """A student making the mistake: each call the mistaken version answers gets its answer
    number ``which`` (the last where it has fewer), every other call the reference's."""
    versions = exercise.mistaken[misconception]

    def answer(name):
        if name not in versions:
            return answering(exercise, name)
        return lambda *args, **kwargs: (lambda found: found[min(which, len(found) - 1)])(
            versions[name](*args, **kwargs))

    return Answering(exercise, answer)


@pytest.mark.parametrize("exercise, misconception, probe", PROBES,
                         ids=[f"{e.name}:{m}" for e, m, _ in PROBES])
def test_each_probe_names_its_own_mistaken_version_and_earns_its_hint_on_it(
        exercise, misconception, probe):
    """The mistaken version (``mistaken=``) is the mistake the probe names: a student who
    answers with any of its answers is named, one who answers as the reference is not. On
    the probe's own calls the mistaken answers earn the hint, an exception does not (a shape
    error, an in-place operation autograd refuses), and a check whose example called nothing
    the mistaken version answers gets no hint (on 4e1a685 every exercise but attention,
    softmax and rope printed it on any failing check the probe listed)."""
    assert exercise.mistaken[misconception], "every probe has a mistaken version"
    reference = Answering(exercise, lambda name: answering(exercise, name))
    try:
        assert probe(reference) is False
    except StudentError:  # the reference refuses a row with no allowed key
        assert "fully-masked" in misconception
    widest = 1
    for which in range(16):
        student = as_mistaken(exercise, misconception, which)
        assert probe(student) is True, which
        shown = [c for c in student.calls if c[0] in exercise.mistaken[misconception]]
        assert earned(exercise, misconception, student.calls) == SHOWS
        widest = max([widest] + [len(exercise.mistaken[misconception][c[0]](*c[1], **c[2]))
                                 for c in shown])
        if which + 1 >= widest:
            break
    raised = StudentError({"type": "RuntimeError", "message": "modified by an inplace operation"})
    calls = [(name, args, kwargs, raised) for name, args, kwargs, _ in student.calls]
    assert earned(exercise, misconception, calls) == DOES_NOT_SHOW
    check = exercise.explained[misconception][0]
    results = {evidence: CheckResult(exercise.name, check, "p", 0, 1, False, False, "Failed: no.")
               for evidence in ("mistaken", "raised", "none")}
    for evidence, result in results.items():
        hint_checks([result], [misconception], exercise=exercise, evidence={
            check: {"mistaken": student.calls, "raised": calls, "none": []}[evidence]})
    hint = feedback_line(misconception)
    assert hint in results["mistaken"].feedback
    assert results["raised"].feedback == results["none"].feedback == "Failed: no."


# -- mha: hints earned by the module's own answers ------------------------------------------------
MHA = (KEY / "mha.py").read_text()


def mha_with(*changes: tuple[str, str]) -> str:
    text = MHA
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


BIASES_UNUSED = (
    ("q, k, v = split(self.wq(x)), split(self.wk(x)), split(self.wv(x))",
     "q, k, v = (split(x @ layer.weight.T) for layer in (self.wq, self.wk, self.wv))"),
    ("return self.wo(y), weights", "return y @ self.wo.weight.T, weights"))
IN_PLACE_SOFTMAX = ("        weights = torch.softmax(scores, dim=-1)\n",
                    "        weights = scores.sub_(scores.amax(dim=-1, keepdim=True)).exp_()\n"
                    "        weights = weights / weights.sum(dim=-1, keepdim=True)\n")
FILL = 'scores = scores.masked_fill(mask, float("-inf"))'


def test_an_autograd_error_under_bias_false_carries_no_bias_hint(tmp_path):
    """Biases never added, and a softmax computed in place (its backward fails): on 4e1a685
    the gradient check's example, bias=False, read 'your code raised RuntimeError: one of the
    variables needed for gradient computation has been modified by an inplace operation' and
    'Likely mistake (bias-unused)' under it. The example where y misses the biases keeps it."""
    result, checks = grade(tmp_path, "mha", {"mha.py": mha_with(*BIASES_UNUSED,
                                                                 IN_PLACE_SOFTMAX)})
    assert result.misconceptions == ["bias-unused"]
    hint = feedback_line("bias-unused")
    gradients = checks["test_gradients_match_torch"].feedback
    assert "modified by an inplace operation" in gradients and "bias False" in gradients
    assert hint not in gradients
    matches = checks["test_matches_torch_multihead_attention"].feedback
    assert "bias True" in matches and hint in matches


MHA_SCORES = "scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, H, T, T)"


@pytest.mark.parametrize("changes, shown", [
    # a (B, H, T, T) mask given one more axis: 5-D weights
    ([(FILL, "if mask.dim() == 4:\n                mask = mask.unsqueeze(1)\n"
             "            scores = torch.where(mask, -1e9, scores)")],
     "the forward pass: weights: got shape (1, 1, 1, 1, 1), expected shape (1, 1, 1, 1)"),
    # the scores in float32: float64 answers right to float32 precision only
    ([(FILL, "scores = scores.masked_fill(mask, -1e9)"),
      (MHA_SCORES, "scores = (q.float() @ k.float().transpose(-2, -1) / "
                   "math.sqrt(self.d_head)).to(q.dtype)")],
     "It agrees to float32 precision"),
], ids=["5-D weights", "float32 precision"])
def test_a_hidden_mha_comparison_carries_no_hint_its_example_does_not_show(
        tmp_path, changes, shown):
    """A fully masked row filled with -1e9 (fully-masked-row) and another mistake: on
    4e1a685 the hidden comparison, failing on a 5-D shape, or to float32 precision (with
    `mask None` under one course secret, a mask with no fully blocked row under the empty
    one), read 'Likely mistake (fully-masked-row)' under it."""
    result, checks = grade(tmp_path, "mha", {"mha.py": mha_with(*changes)})
    assert result.misconceptions == ["fully-masked-row"]
    hint = feedback_line("fully-masked-row")
    hidden = checks["test_mha_matches_answer_key"]
    assert not hidden.passed and shown in hidden.feedback and hint not in hidden.feedback
    assert hint in checks["test_rejects_fully_masked_query"].feedback
