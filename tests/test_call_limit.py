"""One call's own limit: a call that loops or waits ends in about two seconds, its check fails
with a reason, and the rest of the exercise is graded in a fresh worker.

Each test runs under an exercise limit (``timeout``) long enough that, without the call's
own limit, the outcome would differ: the exercise would be lost, not scored."""

from __future__ import annotations

import collections

from submission_tools import EXERCISES, SOLUTIONS, make_submission, rule_off

from grader.core import engine, one_pass
from grader.sandbox import call_limit, isolation
from grader.sandbox.isolation import Limits

SOFTMAX = (SOLUTIONS / "softmax.py").read_text()


def first(body: str) -> str:
    """softmax.py whose softmax runs ``body`` first."""
    return SOFTMAX.replace("    ### BEGIN SOLUTION\n", f"    ### BEGIN SOLUTION\n{body}", 1)


LOOPS_ON_1000 = first("    import numpy\n    if (numpy.asarray(logits) == 1000).any():\n"
                      "        while True:\n            pass\n")
CPU = "used more than 2 s of CPU time and was stopped"


def test_a_call_that_loops_fails_its_check_and_the_rest_is_graded(tmp_path):
    sub = make_submission(tmp_path / "s", {"softmax.py": LOOPS_ON_1000})
    softmax = engine.grade_submission(sub, exercises=["softmax"], include_hidden=False,
                                      limits=Limits(timeout=30, call=0.5)).exercises["softmax"]
    failed = {c.name: c.feedback for c in softmax.checks if not c.passed}
    assert set(failed) == {"test_stable_for_huge_logits",
                           "test_stable_for_slices_of_different_magnitude"}, failed
    # each loops on its fixed example first, shown as it is (no shrinking made it)
    assert all("used more than 0.5 s of CPU time and was stopped" in text
               and "\nFailing input: logits [" in text for text in failed.values())
    assert softmax.error is None and softmax.score == softmax.max_score - 2


def test_a_file_that_loops_at_import_is_stopped_in_a_second(tmp_path):
    sub = make_submission(tmp_path / "s", {"heads.py": "while True:\n    pass\n"})
    result = engine.grade_submission(sub, exercises=["heads", "softmax"], include_hidden=False,
                                     limits=Limits(timeout=30))
    assert CPU in result.exercises["heads"].error
    assert result.exercises["softmax"].score == result.exercises["softmax"].max_score


def test_a_call_that_waits_is_stopped_by_its_wall_limit(tmp_path, monkeypatch):
    rule_off(monkeypatch)  # the source rule refuses `import threading`: the wait is tested
    sub = make_submission(tmp_path / "s", {"softmax.py": first(
        "    import numpy, threading\n    if (numpy.asarray(logits) == 1000).any():\n"
        "        threading.Event().wait(3600)\n")})  # a futex: the seccomp filter allows no sleep
    softmax = engine.grade_submission(sub, exercises=["softmax"], include_hidden=False,
                                      limits=Limits(timeout=30, call=0.2)).exercises["softmax"]
    failed = [c.feedback for c in softmax.checks if not c.passed]
    assert len(failed) == 2 and all("took more than 1 s and was stopped" in f for f in failed)
    assert softmax.error is None


HEADS_LOOP = (SOLUTIONS / "heads.py").read_text().replace(
    "    ### BEGIN SOLUTION\n", "    ### BEGIN SOLUTION\n    while True:\n        pass\n")


def test_a_file_whose_every_call_loops_fails_each_check_with_its_input(tmp_path):
    """A stopped call's time is not the exercise's: every check meets its own stopped call and
    fails with its input, however many there are. On 4e1a685 these stopped calls added up to
    the exercise's limit, and every check read "Not graded: stopped after 2 s: the time limit
    for one exercise (an infinite loop, or very slow code?)", with no input."""
    sub = make_submission(tmp_path / "s", {"heads.py": HEADS_LOOP})
    heads = engine.grade_submission(sub, exercises=["heads"], include_hidden=False,
                                    limits=Limits(timeout=2, call=0.5)).exercises["heads"]
    assert heads.error is None and heads.score == 0
    drawn = {c.name for c in EXERCISES["heads"].checks if c.is_property}  # shrunk; the rest fixed
    for check in heads.checks:
        lines = check.feedback.splitlines()
        assert lines[1] == ("Failed: one call used more than 0.5 s of CPU time and was stopped "
                            "(an infinite loop, or very slow code?)"), check.feedback
        label = "Smallest failing input: " if check.name in drawn else "Failing input: "
        assert lines[2].startswith(label), check.feedback
    assert heads.checks[0].feedback.splitlines()[2] == (
        "Smallest failing input: x [[[0]]] (float64, shape (1, 1, 1)), n_head 1")


def test_the_exercise_limit_holds_calls_that_each_end_within_theirs(tmp_path, monkeypatch):
    """Slow code whose every call ends within its own limit still meets the exercise's."""
    rule_off(monkeypatch)  # the source rule refuses `import threading`: the wait is tested
    sub = make_submission(tmp_path / "s", {"softmax.py": first(
        "    import threading\n    threading.Event().wait(0.3)\n")})
    softmax = engine.grade_submission(sub, exercises=["softmax"], include_hidden=False,
                                      limits=Limits(timeout=2, call=1)).exercises["softmax"]
    assert softmax.score == 0
    assert softmax.error == ("stopped after 2 s: the time limit for one exercise (an infinite "
                             "loop, or very slow code?)")


LOOPS_BELOW = first("    import numpy\n    if (numpy.asarray(logits) < -5).any():\n"
                    "        while True:\n            pass\n")


def test_a_loop_on_some_inputs_shows_a_smaller_input_within_the_shrink_budget(
        tmp_path, monkeypatch):
    """Hypothesis shrinks the input of a stopped call as it does any failure's, each smaller
    input that still loops costing the call's limit again: an exercise spends at most
    SHRINK_STOPS of them (on 4e1a685 none: a check showed the first input that looped,
    "logits [[5.625, 4.875, -9.625, 2.375]] (float32, shape (1, 4)), axis -2"). A question
    stopped once is stopped again at once: the last run of the smallest input, and any
    check that meets it again, cost nothing."""
    from grader.core import student
    from grader.sandbox.errors import CallTimedOut
    from grader.sandbox.isolation import Sandbox

    sub = make_submission(tmp_path / "s", {"softmax.py": LOOPS_BELOW})
    check = next(c for c in exercise_of("softmax").checks if c.name == "test_slices_sum_to_one")
    monkeypatch.setattr(exercise_of("softmax"), "checks", [check])
    stops = [0]
    request = Sandbox.request

    def counted(self, op, **kwargs):
        try:
            return request(self, op, **kwargs)
        except CallTimedOut:
            stops[0] += 1
            raise

    monkeypatch.setattr(Sandbox, "request", counted)
    shown = {}
    for budget in (0, 3):
        monkeypatch.setattr(student, "SHRINK_STOPS", budget, raising=False)
        stops[0] = 0
        softmax = engine.grade_submission(sub, exercises=["softmax"], include_hidden=False,
                                          limits=Limits(timeout=30, call=0.3)
                                          ).exercises["softmax"]
        lines = softmax.checks[0].feedback.splitlines()
        assert lines[1].startswith("Failed: one call used more than 0.3 s of CPU time")
        shown[budget] = (lines[2], stops[0])
    assert shown[0][0] == ("Smallest failing input: logits [[5.625, 4.875, -9.625, 2.375]] "
                           "(float32, shape (1, 4)), axis -2")
    assert shown[3][0] != shown[0][0]
    assert shown[3][1] - shown[0][1] == 3  # the budget, spent: no more


def exercise_of(name):
    from grader.core.course import EXERCISES_BY_NAME

    return EXERCISES_BY_NAME()[name]


def test_every_call_of_the_answer_key_takes_under_a_tenth_of_the_limit(monkeypatch):
    """What makes the limit generous: the key's slowest call, by the kernel's account of its
    worker's CPU time (a measured operation's against its own, larger limit)."""
    used: dict[tuple, float] = collections.defaultdict(float)
    request = isolation.Sandbox.request

    def measured(self, op, **kwargs):
        pid = self.worker_pid()
        before = call_limit.cpu_seconds(pid)
        try:
            return request(self, op, **kwargs)
        finally:
            after = call_limit.cpu_seconds(pid)
            if before is not None and after is not None:
                where = (self.exercise, op, kwargs.get("func", ""), self.call_seconds)
                used[where] = max(used[where], after - before)

    monkeypatch.setattr(isolation.Sandbox, "request", measured)
    # Each call asked alone, so that each is measured on its own (a pass asks them together).
    monkeypatch.setattr(one_pass, "plan_for", lambda *args, **kwargs: {})
    result = engine.grade_submission(SOLUTIONS)
    assert result.score == result.max_score and result.bonus_score == result.bonus_max_score
    assert len(used) > 20
    slow = {where: seconds for where, seconds in used.items() if seconds >= where[3] / 10}
    assert not slow, slow


def test_a_calls_wall_limit_counts_from_when_it_was_sent():
    """Answering a proxy's questions does not give the call a fresh wall limit (the red team
    stretched one call to 15 s by asking the key slow questions): the limit runs from the
    moment the call was sent."""
    import socket
    import time

    ours, theirs = socket.socketpair()
    with ours, theirs:
        began = time.monotonic() - 10  # sent 10 s ago, waiting on answers since
        why = call_limit.wait_for_reply(ours, time.monotonic() + 60, 1.0, lambda: None, None,
                                        began)
    assert why is not None and "took more than 5 s" in why


def test_the_clock_reads_its_own_process_and_nothing_once_it_is_gone():
    """``Clock`` reads the kernel's account of one process through a descriptor opened once:
    the same figure as ``cpu_seconds``, rising as the process computes; once the process is
    reaped, None (never the figure of a process that took its pid)."""
    import subprocess
    import sys
    import time

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    clock = call_limit.Clock(busy.pid)
    try:
        time.sleep(0.5)
        first_read = clock.seconds()
        assert first_read is not None and first_read > 0
        assert abs(first_read - call_limit.cpu_seconds(busy.pid)) < 0.1
        time.sleep(0.5)
        assert clock.seconds() > first_read
    finally:
        busy.kill()
        busy.wait()
    assert clock.seconds() is None
    clock.close()
    assert clock.seconds() is None
    assert call_limit.Clock(busy.pid).seconds() is None  # nothing there to open


# The red team's slow answer (rule off; the key's softmax as `_real`): on its first call, the
# student's code takes over the worker's request loop, sends the first byte of its reply at once
# (its header padded so that the frame's first byte is 0) and the rest after burning CPU well past
# the call's limit (on a worker's first call). The grading process used to watch a call's limits
# only until the first byte, then read the rest under the exercise's minute alone: this scored
# 14/14 (71d34a4).
TRICKLE = '''
import gc, struct, sys, time
import numpy as np

def _zero_first(proto, message):
    body = proto.encode(message)
    rest, header_len, count = struct.unpack_from("<QQQ", body)
    start = 24 + 8 * count
    for pad in range(256):
        if (rest + pad) % 256 == 0:
            header = body[start:start + header_len] + b" " * pad
            return (struct.pack("<QQQ", rest + pad, len(header), count)
                    + body[24:start] + header + body[start + header_len:])

def softmax(logits, axis=-1):
    asker = next(o for o in gc.get_objects() if type(o).__name__ == "Asker")
    proto = next(m for n, m in list(sys.modules.items())
                 if n.endswith("protocol") and hasattr(m, "encode"))
    request = {"op": "call", "id": asker.request,
               "kwargs": {"args": [logits], "kwargs": {"axis": axis}}}
    first = True
    while True:
        asker.sock.sendall(b"\\x00")
        end = time.process_time() + (BURN if first else 0.0)  # the worker's first call only
        while time.process_time() < end:
            pass
        first = False
        try:
            message = {"ok": True, "value": _real(*request["kwargs"]["args"],
                                                  **request["kwargs"]["kwargs"])}
        except ValueError as error:
            message = {"ok": False, "error": {"type": "ValueError", "message": str(error),
                       "value_error": True, "not_implemented": False, "bad_return": False,
                       "where": [], "backward": False}}
        if request.get("op") in ("exit", "hello"):
            message = {"ok": True, "value": None}
        asker.sock.sendall(_zero_first(proto, {**message, "id": request["id"]})[1:])
        request = proto.recv(asker.sock)
'''


def test_a_reply_whose_first_byte_comes_early_is_held_to_the_calls_limits(tmp_path,
                                                                           monkeypatch):
    rule_off(monkeypatch)  # the take-over needs gc, sys and time
    # The take-over speaks the protocol of calls asked alone; a pass's replies are read with
    # the same ``within`` before each read (grader/sandbox/passes.py).
    monkeypatch.setattr(one_pass, "plan_for", lambda *args, **kwargs: {})
    for burn, passes in ((0.0, True), (1.0, False)):
        source = SOFTMAX.replace("def softmax(", "def _real(") + f"\nBURN = {burn}\n" + TRICKLE
        sub = make_submission(tmp_path / f"s{burn}", {"softmax.py": source})
        softmax = engine.grade_submission(sub, exercises=["softmax"], include_hidden=False,
                                          limits=Limits(timeout=30, call=0.3)
                                          ).exercises["softmax"]
        if passes:  # the take-over itself answers right: only the time it takes is at stake
            assert softmax.score == softmax.max_score, [c.feedback for c in softmax.checks]
        else:
            assert softmax.score == 0
            assert all("used more than 0.3 s of CPU time" in c.feedback
                       for c in softmax.checks), [c.feedback for c in softmax.checks]


def test_every_limit_is_stated_as_enforced():
    """The handout's README and --help state the limits the grader holds: on 4e1a685 the
    README read "an infinite loop (60 s limit)", where a call is stopped after 2 s of CPU time
    (5 s in a torch exercise), and --timeout's "wall seconds per exercise" counted the calls
    stopped at their own limit."""
    from grader.core.course import load
    from grader.integrations.routes import handout
    from grader.integrations.routes.cli import build_parser

    readme = " ".join(handout.readme(load()).split())
    assert "(60 s limit)" not in readme
    assert ("One call of your code that runs past its limit (2 s of CPU time, 5 s in `mha.py`, "
            "`gqa.py`, `decode.py`; 5 times that in wall seconds for a call that waits) is "
            "stopped, as an infinite loop is: its check fails and shows the input that did it"
            ) in readme
    assert "An exercise's other calls have 60 s in all; past them the exercise is not graded." \
        in readme
    grade = build_parser()._subparsers._group_actions[0].choices["grade"]
    helps = {a.dest: " ".join(a.help.split()) for a in grade._actions if a.help}
    assert helps["timeout"].startswith("wall seconds the calls of one exercise may take in "
                                       "all, those stopped at --call-timeout aside (default 60)")
    assert "2.5x that in a torch exercise, 5x that in wall seconds" in helps["call_timeout"]
    # A notebook's answer cell may run 30 s in the kernel, but it is graded as a file whose
    # loading is one call (on 4e1a685: "it was saved and will be graded all the same").
    import pytest

    from grader.integrations.routes import kernel

    with pytest.raises(TimeoutError) as stopped, kernel._time_limit(0.05):
        while True:
            pass
    assert str(stopped.value).endswith(
        "it was saved and will be graded all the same, though loading it is one call of the "
        "grader's, stopped past 2 s of CPU time (5 s in a torch exercise), and then the "
        "exercise is not graded")


# A uniform softmax (every weight 1/n: it sums to 1 and moves with no input) that loops on
# logits off this kit's grid of eighths (a check that adds a drawn constant sends some).
UNIFORM_LOOPS_OFF_GRID = first(
    "    import numpy\n    x = numpy.asarray(logits, dtype=float)\n"
    "    if x.size and not numpy.isinf(x).any() and (x * 8 % 1).any():\n"
    "        while True:\n            pass\n"
    "    x = numpy.asarray(logits)\n    if x.dtype.kind in 'biuf' and not numpy.isnan(x).any() "
    "and not numpy.isposinf(x).any() and x.size and not numpy.all(numpy.isneginf(x), "
    "axis=axis).any():\n        return numpy.ones(x.shape, numpy.result_type(x.dtype, "
    "numpy.float32)) / x.shape[axis]\n")


def test_a_call_stopped_off_the_grid_keeps_no_points(tmp_path):
    """A call that runs past its limit shows no use of its input either: the check that sent
    it fails, and the checks the uniform weights pass earn nothing (a stopped call costs only
    its check; on 4e1a685 it lost the whole exercise: "Not graded: one call used more than
    0.2 s of CPU time")."""
    sub = make_submission(tmp_path / "s", {"softmax.py": UNIFORM_LOOPS_OFF_GRID})
    softmax = engine.grade_submission(sub, exercises=["softmax"], include_hidden=False,
                                      limits=Limits(timeout=30, call=0.2)).exercises["softmax"]
    assert softmax.error is None and softmax.score == 0, [c.feedback for c in softmax.checks]
    shown = [c.feedback for c in softmax.checks if "Passed, but no points" in c.feedback]
    assert shown, [c.feedback for c in softmax.checks]
