"""Each exercise's planned calls answered in one pass (``grader.core.one_pass``): the same
verdicts and feedback as calls asked one at a time, for honest, wrong, hanging, exiting and
two-faced code; the key's own questions all planned; the plan's file the grading user's own."""

from __future__ import annotations

import collections
import os
import pickle

import pytest
from submission_tools import SOLUTIONS, make_submission, rule_off

from grader.core import engine, one_pass, student
from grader.core.course import course_secret, load
from grader.sandbox import isolation
from grader.sandbox.isolation import Limits

COURSE = load()
KEY_SOFTMAX = (SOLUTIONS / "softmax.py").read_text()


def _graded(folder, *exercises, planned=True, monkeypatch=None, limits=Limits()):
    """The submission's results as data, graded with the plan (one pass) or without it (each
    call asked alone, as before the plan)."""
    with monkeypatch.context() as patched:
        if not planned:
            patched.setattr(one_pass, "plan_for", lambda *args, **kwargs: {})
        result = engine.grade_submission(folder, course=COURSE, exercises=list(exercises),
                                         jobs=1, limits=limits)
    return {name: {**r.to_dict(), "score": r.score} for name, r in result.exercises.items()}


def _wrapped(body: str) -> str:
    """The key's softmax, renamed, under a ``softmax`` that runs ``body`` first."""
    return (KEY_SOFTMAX.replace("def softmax(", "def _key_softmax(")
            + "\n\nCALLS = [0]\n\n\ndef softmax(logits, axis=-1):\n"
            + "".join(f"    {line}\n" for line in body.strip().splitlines())
            + "    return _key_softmax(logits, axis)\n")


# The student's softmax, answering every call as the key does but where said.
SUBMISSIONS = {
    # A loop on every input of three dimensions: each check that asks one meets the stop.
    "hangs": _wrapped("if np.ndim(logits) == 3:\n    while True:\n        pass"),
    # Wrong on the first 30 calls of the worker, right on every later one: what the pass asked
    # first is wrong, what shrinking asks again alone is right.
    "two-faced": _wrapped("CALLS[0] += 1\n"
                          "if CALLS[0] <= 30:\n    return np.zeros(np.shape(logits))"),
    # Ends the worker on its 25th call.
    "exits": _wrapped("CALLS[0] += 1\nif CALLS[0] == 25:\n    raise SystemExit(3)"),
    # Right the first time it sees an input, every entry 0.5 each time after: a check that
    # asks a question twice must get two answers, as it did one call at a time.
    "wrong-on-repeat": _wrapped("key = (np.asarray(logits).tobytes(), np.shape(logits), axis)\n"
                                "if key in CALLS:\n    return np.full(np.shape(logits), 0.5)\n"
                                "CALLS.append(key)"),
    # Wrong where a slice is long (no shift by the maximum there).
    "wrong": _wrapped("if np.shape(logits) and np.shape(logits)[-1] > 3:\n"
                      "    e = np.exp(np.asarray(logits, dtype=float))\n"
                      "    return e / e.sum(axis=axis, keepdims=True)"),
}


@pytest.mark.parametrize("name", sorted(SUBMISSIONS))
def test_one_pass_grades_as_calls_asked_alone(tmp_path, monkeypatch, name):
    rule_off(monkeypatch)  # SystemExit, for "exits"
    folder = make_submission(tmp_path / name, {"softmax.py": SUBMISSIONS[name]})
    limits = Limits(call=0.15)  # each stop costs 0.15 CPU seconds, not 2
    alone = _graded(folder, "softmax", planned=False, monkeypatch=monkeypatch, limits=limits)
    together = _graded(folder, "softmax", monkeypatch=monkeypatch, limits=limits)
    if name in ("exits", "two-faced"):
        # Code that counts its calls sees them in another order: what it answers differs, but
        # it loses the exercise's points either way, and the same way on every run.
        assert together["softmax"]["score"] < COURSE.points("softmax")
        assert alone["softmax"]["score"] < COURSE.points("softmax")
        assert _graded(folder, "softmax", monkeypatch=monkeypatch, limits=limits) == together
    else:
        assert together == alone
    assert together["softmax"]["score"] < COURSE.points("softmax")


def test_the_keys_questions_are_all_planned(tmp_path, monkeypatch):
    """Grading the key asks its workers nothing one at a time but the loads (and the
    measured operation's fresh worker): every check's questions were in the pass."""
    asked = collections.Counter()
    request = isolation.Sandbox.request

    def counted(self, op, **kwargs):
        if not self.trusted:
            asked[op] += 1
        return request(self, op, **kwargs)

    monkeypatch.setattr(isolation.Sandbox, "request", counted)
    folder = make_submission(tmp_path / "key")
    names = ["softmax", "attention", "mha", "kv_cache"]
    result = engine.grade_submission(folder, course=COURSE, exercises=names, jobs=1)
    assert all(r.score == r.max_score for r in result.exercises.values())
    assert set(asked) == {"load"}, asked


def test_a_plan_that_does_not_fit_changes_no_verdict(tmp_path, monkeypatch):
    """The plan only says what to ask ahead: questions no check asks (another key's, a
    tampered file's) are answered and never read."""
    folder = make_submission(tmp_path / "s", {"softmax.py": SUBMISSIONS["wrong"]})
    honest = _graded(folder, "softmax", monkeypatch=monkeypatch)
    exercise = next(e for e in COURSE.exercises() if e.name == "softmax")
    other = {c: [q[:-1] + b"\x00" for q in qs] + qs[:1]
             for c, qs in one_pass.plan_for(COURSE, SOLUTIONS, course_secret(SOLUTIONS),
                                            engine.available_devices(),
                                            [exercise])["softmax"].items()}
    monkeypatch.setattr(one_pass, "plan_for", lambda *args, **kwargs: {"softmax": other})
    again = _graded(folder, "softmax", monkeypatch=monkeypatch)
    for result in (honest, again):  # a warning the planned calls raised first is not again
        result["softmax"].pop("output")
    assert again == honest


# Wrong the first time it sees an input, right each time after (a red team's: when replies past
# the budget were dropped and asked again of the same worker, only the second answer counted,
# and this scored 15/15, against 0/15 asked alone).
WRONG_THEN_RIGHT = _wrapped("key = (np.asarray(logits).tobytes(), np.shape(logits), axis)\n"
                            "if key not in CALLS:\n    CALLS.append(key)\n"
                            "    return np.full(np.shape(logits), 0.5)")


@pytest.mark.parametrize("name", ["wrong", "wrong-then-right"])
def test_a_pass_past_its_byte_budget_asks_the_rest_alone(tmp_path, monkeypatch, name):
    """Past the budget the pass ends at that reply, kept; the rest are asked alone, in a
    fresh worker: no answer is left unread and asked again of the same worker."""
    rule_off(monkeypatch)
    source = SUBMISSIONS["wrong"] if name == "wrong" else WRONG_THEN_RIGHT
    folder = make_submission(tmp_path / "s", {"softmax.py": source})
    honest = _graded(folder, "softmax", monkeypatch=monkeypatch)
    alone = _graded(folder, "softmax", planned=False, monkeypatch=monkeypatch)
    monkeypatch.setattr(isolation, "BATCH_BYTES", 2000)
    again = _graded(folder, "softmax", monkeypatch=monkeypatch)
    if name == "wrong-then-right":
        assert again["softmax"]["score"] <= alone["softmax"]["score"] < COURSE.points("softmax")
        assert honest["softmax"]["score"] <= alone["softmax"]["score"]
        return
    for result in (honest, again):  # a fresh worker prints its warnings again
        result["softmax"].pop("output")
    assert again == honest


def test_a_batch_may_not_load_or_nest(tmp_path):
    """What a pass holds is calls: a load, an exit or another pass in it ends the worker."""
    folder = make_submission(tmp_path / "s")
    exercise = next(e for e in COURSE.exercises() if e.name == "softmax")
    with isolation.Sandbox(folder, "softmax", framework="numpy") as sandbox:
        student.Student(sandbox, exercise, key_folder=SOLUTIONS).load()
        call = {"op": "call", "kwargs": {"func": "softmax", "args": [[1.0, 2.0]],
                                          "kwargs": {}}}
        outcomes = sandbox.batch([call, {"op": "batch", "kwargs": {"calls": []}}, call])
    assert [outcome[0] for outcome in outcomes] == ["frame", "lost"]


def test_the_plan_file_is_the_grading_users_own(tmp_path, monkeypatch):
    """``build/plan/``: written 0600; a file another user owns, or one that is not a plan, is
    not read."""
    monkeypatch.setattr(one_pass, "PLAN", tmp_path / "plan")
    monkeypatch.setattr(one_pass, "_PLANS", {})
    secret, devices = course_secret(SOLUTIONS), engine.available_devices()
    exercise = next(e for e in COURSE.exercises() if e.name == "softmax")
    made = one_pass.plan_for(COURSE, SOLUTIONS, secret, devices, [exercise])
    one_pass.save(COURSE, SOLUTIONS, secret, devices)
    (path,) = (tmp_path / "plan").iterdir()
    assert path.stat().st_mode & 0o777 == 0o600
    one_pass.forget()
    one_pass.load(COURSE, SOLUTIONS, secret, devices)
    assert one_pass._PLANS and next(iter(one_pass._PLANS.values())) == made
    for data in (b"not a pickle", pickle.dumps({"softmax": {"c": ["not bytes"]}}),
                 pickle.dumps(os.system)):
        one_pass.forget()
        path.write_bytes(data)
        one_pass.load(COURSE, SOLUTIONS, secret, devices)
        assert not any(one_pass._PLANS.values())
    if os.geteuid() == 0:
        path.write_bytes(pickle.dumps(made))
        os.chown(path, 65534, 65534)
        one_pass.forget()
        one_pass.load(COURSE, SOLUTIONS, secret, devices)
        assert not any(one_pass._PLANS.values())

