"""What a report shows under a failing check: inputs each under its own name, and hints earned
by the example they are printed under."""

from __future__ import annotations

import numpy as np

from grader.core.engine import _inputs
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
