"""No points for ignoring the input (``grader.core.vacuous``): a function whose results are,
next to the reference's answers, as good as the same for each group's inputs, one repeated value
or an argument as it was given, or no answer at all, earns no check's points; the answer key
never looks like one on any exercise's informative inputs, whatever the secret.

Two attacks on 4e1a685 (issue 36, parts 2 and 3), each kept here and as zoo entries
(``tests/zoo/wrong/*_uniform_noise_*``, ``*_off_grid``): the rule compared answers bit for bit,
so uniform weights times ``1 + 1e-13 * tanh(x)`` counted as using the input (softmax 7/15,
attention 14/20); and the informative inputs were standard normal while every check draws
multiples of 1/8, and only a ValueError counted, so a uniform softmax that raised TypeError off
the grid kept 6/15. A third told the informative calls by their place, the last two of the
worker (``test_answering_the_last_calls_otherwise_earns_nothing``).
"""

from __future__ import annotations

import numpy as np
import pytest
from submission_tools import COURSE, EXERCISES, SOLUTIONS, make_submission

from grader.core import engine, vacuous
from grader.core.answer_key import AnswerKey
from grader.core.engine import CheckResult
from grader.core.student import NotImplementedYet
from grader.core.vacuous import InformativeCalls, drawn, examples, ignores_input, withhold
from grader.sandbox.errors import CallTimedOut, StudentError

SECRETS = ("", "0123456789abcdef" * 2, "f" * 32, *(f"{n:032x}" for n in range(1, 8)))
CALLS = [(name, info.call) for name in COURSE.names() for info in EXERCISES[name].informative]


@pytest.mark.parametrize("exercise, call", CALLS)
def test_the_answer_key_never_ignores_its_input(exercise, call):
    spec = EXERCISES[exercise]
    key = AnswerKey(SOLUTIONS, spec)
    for secret in SECRETS:
        known = drawn(spec, call, secret)
        assert len(known.inputs) == vacuous.CALLS
        results = [getattr(key, call)(*args) for args in examples(spec, call, secret)]
        assert ignores_input(known.inputs, results, known.answers) is None, (call, secret)


def _on_grid(array: np.ndarray) -> bool:
    """Multiples of 1/8 within [-10, 10], or the distinct entries 0, 1, ... (an arange, as
    heads' and repeat_kv's checks send)."""
    ticks = np.asarray(array, dtype=np.float64) * 8
    arange = np.array_equal(np.sort(array.ravel()), np.arange(array.size))
    return bool(np.all(ticks == np.round(ticks)) and (np.all(np.abs(array) <= 10) or arange))


@pytest.mark.parametrize("exercise, call", CALLS)
def test_the_informative_inputs_are_on_the_checks_grid(exercise, call):
    """Every float array is multiples of 1/8 within the checks' bounds, as float64 or float32
    (softmax_backward's probabilities are the softmax of such logits, as the checks' are):
    the off-grid test that told the old standard-normal inputs apart never fires."""
    for secret in SECRETS[:4]:
        for args in examples(EXERCISES[exercise], call, secret):
            arrays = list(vacuous.parts(list(args)))
            if exercise == "softmax_backward":
                probabilities, *arrays = arrays[:1] + arrays[1:]
                logits = np.log(probabilities)
                assert _on_grid(np.diff(logits, axis=args[2]).round(9))
            floats = [a for a in arrays if a.dtype.kind == "f"]
            assert all(a.dtype in (np.float64, np.float32) and _on_grid(a) for a in floats)


def test_the_examples_follow_the_secret_and_only_it():
    spec = EXERCISES["softmax"]
    again = examples(spec, "softmax", SECRETS[1])
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(again, examples(spec, "softmax",
                                                                          SECRETS[1])))
    assert not np.array_equal(again[0][0], examples(spec, "softmax", SECRETS[2])[0][0])


def test_the_informative_calls_take_places_the_secret_chooses():
    """Not the last calls of the worker: each call is made before one of the visible checks,
    drawn from the secret."""
    spec = EXERCISES["softmax"]
    slots = len([c for c in spec.checks if not c.hidden])
    places = [tuple(sorted(InformativeCalls(spec, None, secret, slots).places))
              for secret in SECRETS]
    assert len(set(places)) > len(SECRETS) // 2
    assert {p for found in places for p in found} <= set(range(slots))


def _softmax_case(seed: int = 0) -> tuple[list[tuple], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    inputs = [(rng.integers(-80, 81, size=(2, 3)) / 8, -1) for _ in range(vacuous.CALLS)]
    answers = [EXERCISES["softmax"].references["softmax"](*args) for args in inputs]
    return inputs, answers


@pytest.mark.parametrize("noise", [1e-13, 1e-9, 1e-6])
def test_uniform_weights_with_relative_noise_ignore_their_input(noise):
    inputs, answers = _softmax_case()
    noisy = []
    for x, _ in inputs:
        w = 1 + noise * np.tanh(x - x.max(axis=-1, keepdims=True))
        noisy.append(w / w.sum(axis=-1, keepdims=True))
    assert ignores_input(inputs, noisy, answers) == "every entry of its result is the same " \
                                                   "number"
    # and so are the same weights for each group's inputs, whatever they are
    fixed = [np.full((2, 3), 1.0) / (1, 2, 4, 8, 16, 32)[i % 6] for i in range(len(inputs))]
    fixed = [f / f.sum(axis=-1, keepdims=True) for f in fixed]
    assert ignores_input(inputs, fixed, answers) is not None
    # A softmax at temperature 100 moves about a hundredth as much as the right one: ten
    # times the tolerance, an answer that follows its input, however wrong.
    hot = [EXERCISES["softmax"].references["softmax"](x / 100, axis) for x, axis in inputs]
    assert ignores_input(inputs, hot, answers) is None


def test_uniform_constant_and_identity_results_ignore_their_input():
    inputs, answers = _softmax_case(1)
    uniform = [np.full((2, 3), 1 / 3) for _ in inputs]
    assert "every entry of its result is the same number" in ignores_input(inputs, uniform,
                                                                          answers)
    order = [np.tile([0.5, 0.3, 0.2], (2, 1)) for _ in inputs]  # one fixed array
    assert "same result for different inputs" in ignores_input(inputs, order, answers)
    assert "returned one of its arguments unchanged" in ignores_input(
        inputs, [x * (1 + 1e-12) for x, _ in inputs], answers)
    # a mask that blocks nothing, for inputs of different sizes
    sizes = [(t,) for t in range(2, 2 + vacuous.CALLS)]
    masks = [np.triu(np.ones((t, t), bool), 1) for t, in sizes]
    assert "every entry of its result is the same number" in ignores_input(
        sizes, [np.zeros((t, t), bool) for t, in sizes], masks)
    # and one that blocks nothing on all but one input is judged by its checks
    some = [np.zeros((t, t), bool) for t, in sizes[:-1]] + masks[-1:]
    assert ignores_input(sizes, some, masks) is None
    # one part of a tuple is enough: attention whose weights are uniform
    rng = np.random.default_rng(2)
    outputs = [(rng.standard_normal((3, 2)), np.full((3, 3), 1 / 3)) for _ in inputs]
    weights = [(rng.standard_normal((3, 2)), rng.dirichlet(np.ones(3), 3)) for _ in inputs]
    assert ignores_input(inputs, outputs, weights) is not None
    # no array at all, for an input that has one
    assert "no array" in ignores_input(inputs, [None, "uniform"] * (len(inputs) // 2), answers)


def test_a_wrong_result_that_depends_on_its_input_is_not_judged():
    inputs, answers = _softmax_case(3)
    no_exp = [x / x.sum(axis=-1, keepdims=True) for x, _ in inputs]  # wrong, not vacuous
    assert ignores_input(inputs, no_exp, answers) is None
    # A one-hot of the largest logit: the same for the two inputs of one group, not of all.
    hard = [(x == x.max(axis=-1, keepdims=True)) / 1.0 for x, _ in inputs]
    assert np.array_equal(hard[0], hard[1]) and ignores_input(inputs, hard, answers) is None
    # Raising on some inputs and answering the others with what depends on them is honest.
    some = [StudentError({"type": "TypeError", "message": "no"}), *no_exp[1:]]
    assert ignores_input(inputs, some, answers) is None
    reshaped = [x.reshape(3, 2) for x, _ in inputs]  # the input's numbers, another shape
    assert ignores_input(inputs, reshaped, answers) is None
    numbers = list(range(2, 2 + vacuous.CALLS))
    assert ignores_input([(n,) for n in numbers], numbers, numbers) is None  # a number is not


class _Answers:
    """A stand-in for the student proxy: ``softmax`` answers as ``reply`` says."""

    def __init__(self, reply):
        self.reply = reply

    def softmax(self, logits, axis=-1):
        return self.reply(np.asarray(logits), axis)


def _judged(reply) -> dict[str, str]:
    spec = EXERCISES["softmax"]
    calls = InformativeCalls(spec, _Answers(reply), "", 1)
    calls.due(0)
    return vacuous.verdicts(calls)


def _raise(error):
    def reply(logits, axis):
        raise error
    return reply


@pytest.mark.parametrize("error, why", [
    (StudentError({"type": "TypeError", "message": "off the grid"}),
     "it raised TypeError on a valid input"),
    (StudentError({"type": "RuntimeError", "message": "off the grid"}),
     "it raised RuntimeError on a valid input"),
    (StudentError({"type": "ValueError", "message": "no", "value_error": True}),
     "it raised ValueError on a valid input"),
    (NotImplementedYet("stub"), "it raised NotImplementedError on a valid input"),
    (CallTimedOut("a call took too long"), "it gave no answer within its time limit"),
])
def test_any_exception_on_a_valid_input_counts_as_ignoring_it(error, why):
    found = _judged(_raise(error))
    assert found["softmax"] == vacuous.NO_POINTS.format(label="softmax", why=why)


def test_a_module_that_cannot_take_the_weights_is_left_to_its_checks():
    """A GroupedQueryAttention whose keys keep the full width (tests/zoo/wrong/
    gqa_full_width_kv.py) cannot load any grouped call's weights; the one check it passes
    (single groups) shows its attention, and keeps its point."""
    import torch

    from grader.sandbox.operation_helpers import BadReturn, load_state

    module = torch.nn.Module()
    module.wk = torch.nn.Linear(2, 2)
    with pytest.raises(BadReturn, match=vacuous.MISFIT):  # the worker's own words
        load_state(module, {"wk.weight": np.zeros((3, 2))})
    misfit = StudentError({"type": "BadReturn", "bad_return": True,
                           "message": f"wk.weight is missing or {vacuous.MISFIT} (2, 4)"})
    assert vacuous.misfit(EXERCISES["gqa"], "gqa_forward", misfit)  # an operation's weights
    # a function loads no weights: the same words from softmax are an answer like any other
    assert not vacuous.misfit(EXERCISES["softmax"], "softmax", misfit)
    assert _judged(_raise(misfit)) != {}
    forged = StudentError({"type": "BadReturn", "bad_return": True,
                           "message": f"a {vacuous.MISFIT} (2, 4)"})  # a class's name
    assert not vacuous.misfit(EXERCISES["gqa"], "gqa_forward", forged)


def test_a_right_answer_on_the_informative_calls_is_not_judged():
    reference = EXERCISES["softmax"].references["softmax"]
    assert _judged(lambda x, axis: reference(x, axis)) == {}


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


LAST_CALLS = '''import numpy as np

calls = []


def softmax(logits, axis=-1):
    """Uniform weights, but the right ones from call LAST on: the informative calls, on 4e1a685
    the last two of the visible worker, after the visible checks' LAST calls."""
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
    and a student counts them once), and it kept 7/15."""
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
