"""Visible verdicts are final before the hidden phase begins (issue 36, part 4).

The attack, as a student who read the grader's source would write it: a softmax that knows the
inputs the visible checks send (their seeds are the checks' names: one local run prints them),
so the first call that is not one of them is a hidden check's. There it exits (or hangs, or
allocates without bound) when the hidden example's sum passes a threshold. On 4e1a685 every
visible check then read "Not graded: the worker stopped during a hidden check" and the exercise
scored 0, and read normally otherwise: one bit of a hidden input in the visible feedback,
before grades are published, on ``grade`` and in the Gradescope bundle (twelve exercises, twelve
bits a submission; resubmissions search values). The second attack leaked through the
diagnosis the hidden worker ran: a softmax that overflows in the checks but answers the
overflow probe right in the visible worker gained, on its visible checks, "Likely mistake
(softmax-overflow): ..." exactly when a hidden example passed the threshold.

Now the visible checks, the exercise's error and its list of mistakes are settled in the visible
worker; a hidden phase that cannot finish costs the hidden checks alone, each with one sentence.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from submission_tools import SOLUTIONS, make_submission

from grader.core import engine
from grader.integrations.outputs import report
from grader.integrations.routes import gradescope, kernel
from grader.sandbox.isolation import TRUNCATED, Limits

KEY = (SOLUTIONS / "softmax.py").read_text()
BODY = KEY.split("    ### BEGIN SOLUTION\n")[1]  # the key's softmax body, validation included
LIMITS = Limits(timeout=30, call=1.0, memory=512 << 20)
LOST = f"Not graded: {engine.HIDDEN_LOST}"

# A digest of one call that the student's code computes in the worker, with NumPy alone.
HELPERS = '''
def _digest(logits, axis):
    x = np.asarray(logits)
    head = repr((x.dtype.str, x.shape, axis)).encode()
    body = x.tobytes() if x.dtype.kind != "O" else repr(x).encode()
    b = np.array(list(head + body), dtype=np.uint64)
    w = np.arange(b.size, dtype=np.uint64) * np.uint64(2654435761) + np.uint64(97)
    return int((b * w).sum() % np.uint64(999983))


def _sum(logits):
    x = np.asarray(logits, dtype=np.float64)
    return float(np.sum(x[np.isfinite(x)]))


PROBE = np.array([[1000.0, 999.0], [-1000.0, -1001.0]])  # the overflow probe's input
told = []


def _right(x):
    return not told and x.shape == PROBE.shape and bool(np.array_equal(x, PROBE))
'''
# The key's softmax that skips the shift (it overflows on large logits), except on the probe's
# own input until ``told``: there it answers right, so the visible diagnosis names nothing.
OVERFLOWS = BODY.replace(
    "shifted = converted - np.max(converted, axis=axis, keepdims=True)",
    "shifted = converted - (np.max(converted, axis=axis, keepdims=True) "
    "if _right(converted) else 0)")
assert OVERFLOWS != BODY
# Each line numbered in the order the worker was asked: a pass asks a phase's planned calls
# ahead of the checks, and the output shows a call's line only where a check read its answer.
RECORDER = '''import numpy as np
{helpers}
asked = []


def softmax(logits, axis=-1):
    asked.append(1)
    try:
        print(f"V{{len(asked)}}", _digest(logits, axis), _sum(logits))
    except Exception:
        print(f"V{{len(asked)}}", _digest(logits, axis), "none")
{body}'''
ACTIONS = {
    "exit": "raise SystemExit(3)",
    "hang": "while True:\n            pass",
    "hoard": "hoard = []\n        while True:\n            hoard.append(np.ones(2**24))",
    "tell": "told.append(1)",  # answer the overflow probe wrong from now on
}
ATTACKER = '''import numpy as np
{helpers}
VISIBLE = {visible!r}
seen = []
hidden = []


def softmax(logits, axis=-1):
    n = len(seen)
    seen.append(_digest(logits, axis))
    if hidden or n > max(VISIBLE) or VISIBLE.get(n, seen[-1]) != seen[-1]:
        hidden.append(n)  # not a call the visible worker gets: a hidden check's
    if hidden and not told and _sum(logits) > THRESHOLD:
        {action}
{body}'''


def attacker(visible: dict[int, int], body: str, action: str):
    """The attack's file for a threshold: ``attacker(...)(threshold)``."""
    text = ATTACKER.format(helpers=HELPERS, visible=visible, body=body, action=ACTIONS[action])
    return lambda threshold: text.replace("THRESHOLD", repr(float(threshold)))


def grade(folder: Path, source: str, *, hidden: bool = True) -> engine.SubmissionResult:
    submission = make_submission(folder, {"softmax.py": source}, base=None)
    return engine.grade_submission(submission, exercises=["softmax"], include_hidden=hidden,
                                   limits=LIMITS)


def recorded(tmp_path: Path, body: str) -> tuple[dict[int, int], list[float]]:
    """What one local run of ``body`` shows its author: the digests of the visible worker's
    calls, by their place in its order (those the output shows), and the sums of the hidden
    examples (printed, as the instructor's view
    shows them; a student learns them by searching)."""
    graded = grade(tmp_path / "recorder", RECORDER.format(helpers=HELPERS, body=body))
    output = graded.results["softmax"].output
    assert TRUNCATED not in output  # every call's line is there
    visible, _, hidden = output.partition("[during the hidden checks]")
    digests = {int(line.split()[0][1:]) - 1: int(line.split()[1])
               for line in visible.splitlines() if line.startswith("V")}
    sums = sorted({float(line.split()[2]) for line in hidden.splitlines()
                   if line.startswith("V") and line.split()[2] != "none"})
    assert digests and sums, graded.results["softmax"].output
    return digests, sums


def spanning(sums: list[float], count: int) -> list[float]:
    """``count`` thresholds from below every hidden sum (the first hidden call fires) to above
    them all (none does)."""
    between = [(a + b) / 2 for a, b in zip(sums, sums[1:])]
    middle = [between[round(i * (len(between) - 1) / (count - 1))] for i in range(1, count - 1)]
    return [sums[0] - 1, *middle, sums[-1] + 1]


def visible_routes(graded: engine.SubmissionResult) -> str:
    """Everything a student reads of the visible checks before grades are published, on every
    route: the checks themselves (``grade``, ``batch``), the exercise's error and diagnosis,
    Gradescope's visible tests, the notebook's visible test cell (nbgrader feedback)."""
    e = graded.results["softmax"]
    shown = [c for c in e.checks if not c.hidden]
    points = 0 if e.error else sum(c.points for c in shown)
    return json.dumps({
        "checks": [dataclasses.asdict(c) for c in shown],
        "error": e.error,
        "misconceptions": e.misconceptions,
        "gradescope": [t for t in report.to_json(graded)["tests"] if t["visibility"] == "visible"],
        "nbgrader": kernel.feedback_text("softmax", e, shown, points),
    }, sort_keys=True)


def hidden_checks(graded: engine.SubmissionResult) -> list[engine.CheckResult]:
    hidden = [c for c in graded.results["softmax"].checks if c.hidden]
    assert hidden
    return hidden


STUB = "    raise NotImplementedError\n"  # a stub's body: "Not implemented yet." in the notebook


@pytest.mark.parametrize("action, count, body", [("exit", 4, BODY), ("hang", 2, BODY),
                                                 ("hoard", 2, BODY)],
                         ids=["exit", "hang", "hoard"])
def test_visible_verdicts_do_not_depend_on_what_a_hidden_call_does(tmp_path, action, count,
                                                                     body):
    visible, sums = recorded(tmp_path, body)
    attack = attacker(visible, body, action)
    alone = grade(tmp_path / "alone", attack(sums[0] - 1), hidden=False)
    expected = visible_routes(alone)
    summaries, fired = set(), []
    for n, threshold in enumerate(spanning(sums, count)):
        graded = grade(tmp_path / f"{action}{n}", attack(threshold))
        assert visible_routes(graded) == expected, threshold
        summaries.add(gradescope.visible_summary(graded))
        lost = [c for c in hidden_checks(graded) if c.feedback.endswith(LOST)]
        # One sentence whatever stopped the worker, on every hidden check, and nothing else.
        assert all(c.feedback == f"Property: {c.prop}\n{LOST}" and c.points == 0 for c in lost)
        assert lost in ([], hidden_checks(graded))
        assert graded.results["softmax"].error is None
        fired.append(bool(lost))
    assert len(summaries) == 1
    assert fired[0] and not fired[-1]  # the attack fires below the hidden sums, not above


def test_a_stub_is_a_stub_by_its_visible_checks_whatever_its_hidden_worker_did(tmp_path,
                                                                               monkeypatch):
    """A stub's checks stop at their first call, the simplest input, and so does the hidden
    one's: no call tells a stub's hidden worker from its visible one, so the hidden worker is
    made to stop here (its loading fails). The notebook's visible test cell once listed each
    check, instead of "Not implemented yet.", when the hidden worker had stopped."""
    stub = "import numpy as np\n\n\ndef softmax(logits, axis=-1):\n" + STUB
    alone = grade(tmp_path / "alone", stub, hidden=False)
    loaded = engine._loaded
    workers = []

    def stopping(sandbox, exercise, key):
        workers.append(sandbox)
        if len(workers) > 1:
            raise engine.WorkerLost("the worker was stopped")
        return loaded(sandbox, exercise, key)

    monkeypatch.setattr(engine, "_loaded", stopping)
    graded = grade(tmp_path / "stopped", stub)
    assert len(workers) == 2 and all(c.feedback == f"Property: {c.prop}\n{LOST}"
                                     for c in hidden_checks(graded))
    assert visible_routes(graded) == visible_routes(alone)
    assert graded.results["softmax"].not_implemented


def test_a_hidden_diagnosis_never_reaches_a_visible_check(tmp_path):
    visible, sums = recorded(tmp_path, OVERFLOWS)
    attack = attacker(visible, OVERFLOWS, "tell")
    alone = grade(tmp_path / "alone", attack(sums[-1] + 1), hidden=False)
    e = alone.results["softmax"]
    assert e.misconceptions == [] and not all(c.passed for c in e.checks)
    for n, threshold in enumerate((sums[0] - 1, sums[-1] + 1)):
        graded = grade(tmp_path / f"tell{n}", attack(threshold))
        assert visible_routes(graded) == visible_routes(alone), threshold
        assert "Likely mistake" not in report.render(graded)
