"""No points for ignoring the input (``grader.core.vacuous``), judged on each check's own calls:
a passed check loses its points only where, on its own calls, the student's answers show
nothing of their input next to the reference's answers to the same calls; a check none of
whose calls can tell (input checks) is judged by the others' calls; and the answer key is never
judged to ignore its input, whatever the secret and whatever its results hold (-inf, NaN,
integers, bools, tuples).

Attacks kept here and as zoo entries (``tests/zoo/wrong/*_uniform*``, ``*_off_grid``): uniform
weights, bare or times ``1 + noise * tanh(x)`` (1e-13, 1e-9, 1e-6), or raising off the checks'
1/8 grid; and a file that answers the worker's last calls otherwise
(``test_answering_the_last_calls_otherwise_earns_nothing``). Two honest files that the
informative calls of c6e9838 convicted are zoo entries too (``test_zoo``).
"""

from __future__ import annotations

import numpy as np
import pytest
from submission_tools import COURSE, EXERCISES, SOLUTIONS, make_submission

from grader.core import engine, movement, vacuous
from grader.core.engine import CheckResult
from grader.core.movement import Entries
from grader.core.student import NotImplementedYet
from grader.core.vacuous import Call, Judge, read
from grader.sandbox.errors import CallTimedOut, StudentError

SOFTMAX = EXERCISES["softmax"]
ATTENTION = EXERCISES["attention"]
softmax = SOFTMAX.references["softmax"]
attention = ATTENTION.references["scaled_dot_product_attention"]


def reading(name: str, exercise, inputs: list[tuple], replies: list, passed: bool = True):
    """What ``replies`` to the calls ``inputs`` of ``name`` show, next to the reference's."""
    judged = next(j for j in exercise.judged if j.call == name)
    calls = [Call(name, args, {}, reply) for args, reply in zip(inputs, replies)]
    return read(calls, lambda call: Judge(exercise).answer(judged, call), passed)


def logits(seed: int = 0, count: int = 6) -> list[tuple]:
    """Softmax calls of shape (2, 3) on the checks' grid."""
    rng = np.random.default_rng(seed)
    return [(rng.integers(-80, 81, size=(2, 3)) / 8, -1) for _ in range(count)]


# -- what ignores its input -------------------------------------------------------------------
@pytest.mark.parametrize("noise", [0, 1e-13, 1e-9, 1e-6])
def test_uniform_weights_bare_or_with_relative_noise_ignore_their_input(noise):
    inputs = logits()
    noisy = []
    for x, _ in inputs:
        w = 1 + noise * np.tanh(x - x.max(axis=-1, keepdims=True))
        noisy.append(w / w.sum(axis=-1, keepdims=True))
    assert reading("softmax", SOFTMAX, inputs, noisy).ignored() == vacuous.CONSTANT
    # A softmax at temperature 100 moves about a hundredth as much as the right one: ten
    # times the tolerance, an answer that follows its input, however wrong.
    hot = [softmax(x / 100, axis) for x, axis in inputs]
    assert reading("softmax", SOFTMAX, inputs, hot).ignored() is None


def test_a_fixed_array_or_an_argument_as_given_ignores_its_input():
    inputs = logits(1)
    fixed = [np.tile([0.5, 0.3, 0.2], (2, 1)) for _ in inputs]  # the same for every input
    assert reading("softmax", SOFTMAX, inputs, fixed).ignored() == vacuous.FIXED
    same = [x * (1 + 1e-12) for x, _ in inputs]
    assert reading("softmax", SOFTMAX, inputs, same).ignored() == vacuous.ARGUMENT
    # One fixed array, but one call of a shape no other call has: nothing to compare it with.
    assert reading("softmax", SOFTMAX, inputs[:1], fixed[:1]).ignored() is None


def test_a_wrong_answer_that_depends_on_its_input_is_not_judged():
    inputs = logits(3)
    no_exp = [x / x.sum(axis=-1, keepdims=True) for x, _ in inputs]
    assert reading("softmax", SOFTMAX, inputs, no_exp).ignored() is None
    # a one-hot of the largest logit: the same for some inputs, not for all
    hard = [(x == x.max(axis=-1, keepdims=True)) / 1.0 for x, _ in inputs]
    assert reading("softmax", SOFTMAX, inputs, hard).ignored() is None
    reshaped = [softmax(x, -1).reshape(3, 2) for x, _ in inputs]  # another shape
    assert reading("softmax", SOFTMAX, inputs, reshaped).ignored() is None


def test_attention_uniform_over_the_allowed_keys_ignores_q_and_k():
    """Its weights move with the mask alone: the answer for q and k of zeros."""
    rng = np.random.default_rng(4)
    mask = np.array([[False, True, False], [False, False, True], [False, False, False]])
    inputs = [tuple(rng.integers(-24, 25, size=(2, 3, 2)) / 8 for _ in range(3)) + (mask,)
              for _ in range(4)]
    allowed = ~mask / (~mask).sum(-1, keepdims=True)
    uniform = [(allowed @ v, np.broadcast_to(allowed, (2, 3, 3))) for _, _, v, _ in inputs]
    assert reading("scaled_dot_product_attention", ATTENTION, inputs,
                   uniform).ignored() == vacuous.ZEROS
    right = [attention(*args) for args in inputs]
    assert reading("scaled_dot_product_attention", ATTENTION, inputs, right).ignored() is None


def test_a_call_that_cannot_tell_is_left_out():
    """Logits of zeros (the reference is uniform) and attention with one allowed key per query
    (the reference is the mask's own answer) show nothing of whether the answer uses them."""
    zeros = [(np.zeros((2, 3)), -1)] * 3
    uniform = [np.full((2, 3), 1 / 3)] * 3
    assert not reading("softmax", SOFTMAX, zeros, uniform).judged
    mask = np.array([[False, True], [True, False]])
    one_key = [(np.ones((2, 1)), np.ones((2, 1)), np.ones((2, 1)), mask)]
    allowed = (~mask).astype(float)
    assert not reading("scaled_dot_product_attention", ATTENTION, one_key,
                       [(allowed @ np.ones((2, 1)), allowed)]).judged


@pytest.mark.parametrize("error, why", [
    (StudentError({"type": "TypeError", "message": "off the grid"}),
     "it raised TypeError on a valid input"),
    (StudentError({"type": "ValueError", "message": "no", "value_error": True}),
     "it raised ValueError on a valid input"),
    (NotImplementedYet("stub"), "it raised NotImplementedError on a valid input"),
    (CallTimedOut("a call took too long"), "it gave no answer within its time limit"),
])
def test_an_exception_counts_against_its_call_only(error, why):
    inputs = logits(5)
    assert reading("softmax", SOFTMAX, inputs, [error] * len(inputs),
                   passed=False).ignored() == why
    # raising on some inputs and answering the others with what depends on them is honest
    right = [softmax(*args) for args in inputs]
    assert reading("softmax", SOFTMAX, inputs, [error] + right[1:], passed=False).ignored() is None
    # uniform where it answers: the answers say why, not the exception
    uniform = [np.full((2, 3), 1 / 3)] * (len(inputs) - 1)
    assert reading("softmax", SOFTMAX, inputs, [error, *uniform],
                   passed=False).ignored() == vacuous.CONSTANT
    # in a check that passed, an exception was what the check asked for
    assert not reading("softmax", SOFTMAX, inputs, [error] * len(inputs)).judged


def test_nan_or_no_array_is_no_answer():
    inputs = logits(6)
    nan = [np.full((2, 3), np.nan)] * len(inputs)
    assert reading("softmax", SOFTMAX, inputs, nan).ignored() == vacuous.NAN
    assert reading("softmax", SOFTMAX, inputs, ["uniform"] * len(inputs)).ignored() == \
        vacuous.NO_ARRAY


# -- results holding -inf, inf, NaN, integers, bools, tuples ----------------------------------
def test_infinite_entries_are_a_pattern_not_an_infinite_spread():
    """On c6e9838 a result holding -inf had an infinite spread, and ``inf <= 1e-3 * inf``
    convicted the key's alibi_bias (3/10)."""
    bias = np.array([[0.0, -np.inf, -np.inf], [-0.5, 0.0, -np.inf], [-1.0, -0.5, 0.0]])
    entries = Entries(bias)
    assert (entries.spread, entries.uniform) == (0.5, False)  # in halves
    assert movement.tells(entries) and not movement.constant(entries, entries)
    assert movement.constant(Entries(np.zeros((3, 3))), entries)
    assert movement.constant(Entries(np.full((3, 3), -np.inf)), entries)
    assert not movement.constant(Entries(np.where(np.isinf(bias), bias, 0.0)), entries)
    huge = np.array([-1e308, 1e308])  # no difference of two entries overflows
    assert Entries(huge).spread == 1e308
    assert movement.same((Entries(bias), Entries(bias)), (Entries(bias), Entries(bias.T))) is True


def test_the_key_is_never_convicted_by_what_its_results_hold():
    """Each rule, the key's answers (here the reference's own) against the reference's:
    -inf in a mask, NaN, integers, bools, tuples of arrays; and a right answer in float32."""
    answers = [
        [np.array([[0.0, -np.inf], [-1.5, 0.0]]), np.array([[0.0, -np.inf], [-3.0, 0.0]])],
        [np.array([np.nan, 1.0, 2.0]), np.array([np.nan, 3.0, 2.0])],
        [np.array([2, 5]), np.array([3, 5])],
        [np.array([[False, True], [False, False]]), np.array([[False, True], [True, False]])],
        [(np.array([1.0, 2.0]), np.array([[0.5, 0.5], [0.25, 0.75]])),
         (np.array([1.5, 2.0]), np.array([[0.75, 0.25], [0.5, 0.5]]))],
    ]
    for pair in answers:
        calls = [Call("f", (n,), {}, answer) for n, answer in enumerate(pair)]
        got = read(calls, lambda call, pair=pair: pair[call.args[0]])
        assert got.judged and got.ignored() is None, pair
    inputs = logits(7)
    float32 = [softmax(x.astype(np.float32), axis) for x, axis in inputs]
    assert reading("softmax", SOFTMAX, inputs, float32).ignored() is None


# -- a check judged on its own calls, or by the others ----------------------------------------
def result(name: str, passed: bool = True) -> CheckResult:
    return CheckResult("softmax", name, "A property.", 1 if passed else 0, 1, False, passed,
                       "" if passed else "Property: A property.\nFailed: no")


def test_a_check_that_cannot_tell_is_judged_by_the_others():
    """An input check (every call one the reference rejects) keeps its points where another
    check's calls show the function using its input, and only there."""
    rejected = [Call("softmax", (np.array([0.0, np.nan]),), {},
                     StudentError({"type": "ValueError", "message": "no", "value_error": True}))]
    inputs = logits(8)
    for replies, line in [([softmax(*args) for args in inputs], None),
                          ([np.full((2, 3), 1 / 3)] * len(inputs), vacuous.NO_POINTS.format(
                              label="softmax", why=vacuous.CONSTANT))]:
        judge = Judge(SOFTMAX)
        calls = [Call("softmax", args, {}, reply) for args, reply in zip(inputs, replies)]
        judge.note("test_sums", calls, {"softmax"}, passed=True)
        judge.note("test_rejects", rejected, {"softmax"}, passed=True)
        results = [result("test_sums"), result("test_rejects")]
        judge.withhold(results)
        assert [r.feedback.splitlines()[-1] if r.feedback else None for r in results] == [
            line, line]
        assert [r.points for r in results] == ([0, 0] if line else [1, 1])


def test_only_a_passed_check_loses_its_points():
    judge = Judge(SOFTMAX)
    inputs = logits(9)
    uniform = [Call("softmax", args, {}, np.full((2, 3), 1 / 3)) for args in inputs]
    judge.note("test_passed", uniform, {"softmax"}, passed=True)
    judge.note("test_failed", uniform, {"softmax"}, passed=False)
    judge.note("test_other", [], {"mha_build"}, passed=True)
    results = [result("test_passed"), result("test_failed", passed=False), result("test_other")]
    judge.withhold(results)
    assert [(r.points, r.passed) for r in results] == [(0, False), (0, False), (1, True)]
    assert results[0].feedback == "Property: A property.\n" + vacuous.NO_POINTS.format(
        label="softmax", why=vacuous.CONSTANT)
    assert results[1].feedback.endswith("Failed: no")


def test_what_a_check_keeps_and_the_answers_kept_are_bounded(monkeypatch):
    """A file may answer every call with an array as large as a reply may be: a check keeps
    its calls up to ``Kept.MAX_BYTES``, and the reference's answers kept for the next
    submission stay within ``MAX_ANSWER_BYTES``."""
    monkeypatch.setattr(vacuous.Kept, "MAX_BYTES", 10_000)
    calls = vacuous.Kept()
    for _ in range(5):
        calls.keep("softmax", (np.zeros(250),), {}, np.zeros(250))  # 4.3 KB each
    assert len(calls) == 2 and calls.bytes <= 10_000
    monkeypatch.setattr(vacuous, "ANSWERS", vacuous.OrderedDict())
    monkeypatch.setattr(vacuous, "_HELD", [0])
    monkeypatch.setattr(vacuous, "MAX_ANSWER_BYTES", 64 * 5_000)
    judge = Judge(SOFTMAX)
    for seed in range(100):
        x = np.random.default_rng(seed).standard_normal(250)
        judge.answer(SOFTMAX.judged[0], Call("softmax", (x, -1), {}, None))
    assert 0 < len(vacuous.ANSWERS) < 100 and vacuous._HELD[0] <= 64 * 5_000
    assert vacuous._HELD[0] == sum(size for _, size in vacuous.ANSWERS.values())


# -- the answer key, graded ---------------------------------------------------------------------
@pytest.mark.parametrize("exercise", COURSE.names())
def test_the_answer_key_is_never_judged_to_ignore_its_input(exercise, monkeypatch):
    """The key graded as a submission, under two course secrets (the hidden checks' examples
    follow the secret): every judged name is judged on some check's own calls, and no check's
    calls are found to ignore their input."""
    readings: list[tuple[str, str, vacuous.Reading]] = []
    kept = Judge.reading

    def noting(self, check, judged):
        found = kept(self, check, judged)
        readings.append((check, judged.call, found))
        return found

    monkeypatch.setattr(Judge, "reading", noting)
    for secret in ("", "0123456789abcdef" * 2):
        monkeypatch.setenv("ATTENTION_KIT_SECRET", secret)
        readings.clear()
        graded = engine.grade_submission(SOLUTIONS, exercises=[exercise])
        checks = graded.results[exercise].checks
        assert all(c.passed for c in checks), [c.feedback for c in checks if not c.passed]
        judged = {name for _, name, r in readings if r.judged}
        assert judged == {j.call for j in EXERCISES[exercise].judged}, secret
        assert [(c, n, r.ignored()) for c, n, r in readings if r.ignored()] == [], secret


LAST_CALLS = '''import numpy as np

calls = []


def softmax(logits, axis=-1):
    """Uniform weights, but the right ones from call LAST on: on 4e1a685 the informative
    calls were the last two of the visible worker, after the visible checks' LAST calls."""
    calls.append(1)
    x = np.asarray(logits)
    if x.dtype.kind not in "biuf" or np.any(np.isnan(x) | np.isposinf(x)):
        raise ValueError("bad logits")
    if x.size == 0 or np.any(np.all(np.isneginf(x), axis=axis)):
        raise ValueError("a fully masked slice")
    x = x.astype(np.result_type(x.dtype, np.float32))
    if len(calls) > LAST:
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / np.sum(e, axis=axis, keepdims=True)
    w = np.where(np.isneginf(x), 0.0, 1.0).astype(x.dtype)
    return w / np.sum(w, axis=axis, keepdims=True)
'''


def test_answering_the_last_calls_otherwise_earns_nothing(tmp_path):
    """The uniform softmax of the zoo, right on the worker's last two calls: on 4e1a685 those
    were the informative calls (the visible checks make the same number of calls on every run,
    and a student counts them once), and it kept 7/15. Now the last calls are a check's own,
    each judged with its check."""
    def graded(last: int, folder: str) -> engine.ExerciseResult:
        text = LAST_CALLS.replace("LAST", str(last))
        submission = make_submission(tmp_path / folder, {"softmax.py": text}, base=None)
        return engine.grade_submission(submission, exercises=["softmax"],
                                       include_hidden=False).results["softmax"]

    counting = LAST_CALLS.replace("    calls.append(1)\n", "    calls.append(1)\n"
                                  "    print('call', len(calls))\n")
    submission = make_submission(tmp_path / "count", {"softmax.py": counting.replace(
        "LAST", "10**9")}, base=None)
    output = engine.grade_submission(submission, exercises=["softmax"],
                                     include_hidden=False).results["softmax"].output
    total = sum(line.startswith("call ") for line in output.splitlines())
    result = graded(total - 2, "last")
    assert result.score <= 2, [c.name for c in result.checks if c.passed]
