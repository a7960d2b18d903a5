"""No answer key is ever convicted: a key graded by the kit keeps every point of every check,
whatever its answers hold: ``-inf``, NaN, integers, a tuple, booleans.

An instructor's ALiBi bias (a causal mask of ``-inf`` above the diagonal) scored 3/10 as its
own answer key: "Passed, but no points: alibi_bias ignores its input (every entry of its
result is the same number)": the spread of a result holding ``-inf`` is infinite, and
``inf <= 1e-3 * inf`` holds (``grader.core.vacuous``). The kit's own keys are held to full
marks by ``test_answer_key.test_the_key_keeps_every_point``; here an exercise of the test's
own, one function per kind of answer, is added to a copy of the kit (``kit_copy``) and its key
graded as a submission.
"""

from __future__ import annotations

import json

import kit_copy
import pytest

MODULE = '''"""Bonus exercise `own_answers`: one function per kind of answer (a test's own)."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from ..core.assertions import assert_close, assert_equal
from ..core.exercise import Exercise
from ..core.strategies import floats_array

EX = Exercise("own_answers", functions=("alibi_bias", "root_or_nan", "ranks", "top",
                                        "above_mean"),
              framework="numpy", track="bonus", points=5, order=99, title="answers of each kind")


@EX.reference
def alibi_bias(n_head, t):
    slopes = torch.tensor(2.0, dtype=torch.float64) ** (
        -8.0 * torch.arange(1, n_head + 1, dtype=torch.float64) / n_head)
    offset = torch.arange(t)[None, :] - torch.arange(t)[:, None]
    return (slopes[:, None, None] * offset).masked_fill(offset > 0, float("-inf")).numpy()


@EX.reference
def root_or_nan(x):
    x = torch.from_numpy(x)
    return torch.where(x > 0, x.abs().sqrt(), torch.nan).numpy()


@EX.reference
def ranks(x):
    order = torch.argsort(torch.from_numpy(x), dim=-1, stable=True)
    return torch.argsort(order, dim=-1, stable=True).numpy()


@EX.reference
def top(x):
    return tuple(v.numpy() for v in torch.from_numpy(x).max(-1))


@EX.reference
def above_mean(x):
    x = torch.from_numpy(x)
    return (x > x.mean(-1, keepdim=True)).numpy()


sizes = st.tuples(st.integers(1, 6), st.integers(2, 6))
arrays = st.integers(2, 5).flatmap(lambda n: floats_array(np.float64, (3, n), -4, 4))


@EX.check(points=1, prop="alibi_bias is ALiBi's causal bias: -inf above the diagonal.")
@given(size=sizes)
def test_alibi_bias(ctx, size):
    assert_close(ctx.student.alibi_bias(*size), alibi_bias(*size))


@EX.check(points=1, prop="root_or_nan is the square root where x > 0, NaN elsewhere.")
@given(x=arrays)
def test_root_or_nan(ctx, x):
    got, want = np.asarray(ctx.student.root_or_nan(x)), root_or_nan(x)
    assert_equal(np.isnan(got), np.isnan(want), "where it is NaN")
    assert_close(np.nan_to_num(got), np.nan_to_num(want))


@EX.check(points=1, prop="ranks gives each entry its rank in its row.")
@given(x=arrays)
def test_ranks(ctx, x):
    assert_equal(ctx.student.ranks(x), ranks(x))


@EX.check(points=1, prop="top gives each row's largest value and where it is.")
@given(x=arrays)
def test_top(ctx, x):
    got, want = ctx.student.top(x), top(x)
    assert_close(got[0], want[0])
    assert_equal(got[1], want[1])


@EX.check(points=1, prop="above_mean is True where an entry is above its row's mean.")
@given(x=arrays)
def test_above_mean(ctx, x):
    assert_equal(ctx.student.above_mean(x), above_mean(x))


# What is judged for ignoring its input: each function (on a kit that judges the checks' own
# calls, EX.judge_input; before it, informative inputs drawn as the checks draw theirs).
if hasattr(EX, "judge_input"):
    for name in EX.functions:
        EX.judge_input(name)
else:
    EX.informative_inputs("alibi_bias")(lambda draw, calls: [draw(sizes) for _ in range(calls)])
    for name in EX.functions[1:]:
        EX.informative_inputs(name)(lambda draw, calls: [(draw(arrays),) for _ in range(calls)])
'''

KEY = '''"""Bonus exercise `own_answers`: one function per kind of answer (a test's own)."""

import numpy as np


def alibi_bias(n_head, t):
    """ALiBi's causal bias, float64 of shape (n_head, t, t)."""
    ### BEGIN SOLUTION
    slope = np.power(2.0, -8.0 * np.arange(1, n_head + 1) / n_head)
    row, column = np.indices((t, t))
    return np.where(column > row, -np.inf, slope[:, None, None] * (column - row))
    ### END SOLUTION


def root_or_nan(x):
    """The square root of x where x > 0, NaN elsewhere."""
    ### BEGIN SOLUTION
    return np.where(x > 0, np.sqrt(np.abs(x)), np.nan)
    ### END SOLUTION


def ranks(x):
    """Each entry's rank in its row (ties in order), integers."""
    ### BEGIN SOLUTION
    return np.argsort(np.argsort(x, axis=-1, kind="stable"), axis=-1, kind="stable")
    ### END SOLUTION


def top(x):
    """(each row's largest value, its index)."""
    ### BEGIN SOLUTION
    return x.max(axis=-1), x.argmax(axis=-1)
    ### END SOLUTION


def above_mean(x):
    """True where an entry is above its row's mean."""
    ### BEGIN SOLUTION
    return x > x.mean(axis=-1, keepdims=True)
    ### END SOLUTION
'''

CHECKS = {"minus-inf": "test_alibi_bias", "nan": "test_root_or_nan", "integers": "test_ranks",
          "tuple": "test_top", "booleans": "test_above_mean"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, dict]:
    """The key of the test's own exercise graded in a copy of the kit: check -> its test in
    results.json."""
    kit = kit_copy.make(tmp_path_factory.mktemp("kit"))
    (kit / "grader" / "problems" / "own_answers.py").write_text(MODULE)
    (kit / "solutions" / "own_answers.py").write_text(KEY)
    done = kit_copy.run(kit, ".venv/bin/python -m grader grade solutions --exercise own_answers "
                             "--json results.json")
    assert done.returncode == 0, done.stdout
    tests = json.loads((kit / "results.json").read_text())["tests"]
    return {t["name"].rsplit(": ", 1)[1]: t for t in tests}


@pytest.mark.parametrize("kind", list(CHECKS))
def test_a_key_answering_with_kind_keeps_every_point(kind, graded):
    test = graded[CHECKS[kind]]
    assert (test["status"], test["score"]) == ("passed", test["max_score"]), test["output"]
