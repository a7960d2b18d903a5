"""Examples drawn once and replayed (``grader.core.replay``): a replayed check passes or fails
exactly as a drawn one does, says the same, and draws nothing when it passes."""

from __future__ import annotations

import io
import json
import os
import pickle
from types import SimpleNamespace

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from submission_tools import KIT

from grader.core import engine, replay
from grader.core.assertions import CheckFailed
from grader.core.exercise import Context, Exercise
from grader.integrations import report

EX = Exercise("replay_demo", functions=("f",), framework="numpy", track="core", points=4,
              order=99, title="a made-up exercise")
DRAWN: list[int] = []  # every value Hypothesis drew for `at_most_the_limit`


class Stop(BaseException):
    """Not a failure to Hypothesis: it ends the check at once."""


@EX.check(points=1, prop="x is at most the student's limit.")
@given(x=st.integers(0, 1000).map(lambda x: DRAWN.append(x) or x))
def at_most_the_limit(ctx, x):
    if ctx.student.stop is not None and x > ctx.student.stop:
        raise Stop(x)
    if x > ctx.student.limit:
        raise CheckFailed(f"{x} is over the limit")


@EX.check(points=1, prop="A drawn y is at most the limit too.")
@given(x=st.integers(0, 10), data=st.data())
def drawn_within(ctx, x, data):
    y = data.draw(st.integers(0, 1000) if ctx.student.wide else st.integers(0, 1001), label="y")
    if y > ctx.student.limit:
        raise CheckFailed(f"{y} is over the limit")


@EX.check(points=1, prop="Even x only.")
@given(x=st.integers(0, 1000))
def even_only(ctx, x):
    assume(x % 2 == 0)


SEEN: list[tuple] = []  # what `global_generators` read from the global generators


@EX.check(points=1, prop="Reads the global generators (an instructor's check might).")
@given(x=st.integers(0, 1000))
def global_generators(ctx, x):
    import random

    import numpy as np

    SEEN.append((x, random.random(), float(np.random.rand()), random.getrandbits(64)))


def run(name: str, *, limit: int = 10_000, stop: int | None = None, wide: bool = True):
    """Run the check ``name`` for a made-up student; its outcome and shown example."""
    check = next(c for c in EX.checks if c.name == name)
    ctx = Context(SimpleNamespace(limit=limit, stop=stop, wide=wide))
    try:
        check.run(ctx, examples=20)
        outcome = "passed"
    except CheckFailed as failure:
        outcome = f"failed: {failure.message}"
    return outcome, {k: v for k, v in ctx.example.items()}


def key(name: str) -> tuple:
    check = next(c for c in EX.checks if c.name == name)
    return (check.func, replay.seed_digest(""), 20, ("cpu",))


@pytest.fixture(autouse=True)
def fresh():
    replay.forget()
    DRAWN.clear()
    SEEN.clear()
    yield
    replay.forget()


def test_a_passing_check_is_replayed_without_drawing():
    assert run("at_most_the_limit") == ("passed", {"x": DRAWN[-1]})
    drawn = len(DRAWN)
    assert key("at_most_the_limit") in replay._RECORDED and drawn > 5
    assert run("at_most_the_limit") == ("passed", {"x": DRAWN[-1]})
    assert len(DRAWN) == drawn  # nothing drawn the second time


def test_a_replayed_example_reads_the_global_generators_as_a_drawn_one_does():
    """Each example starts from the state Hypothesis seeds random's and NumPy's global
    generators to, replayed or drawn; after the check they are as they were before it."""
    import random

    import numpy as np

    random.seed(1234)
    np.random.seed(1234)
    before = (random.getstate(), np.random.get_state(legacy=False))
    run("global_generators")
    drawn = list(SEEN)
    assert len(drawn) > 5 and len({values[1:] for values in drawn}) == 1  # seeded each time
    SEEN.clear()
    run("global_generators")  # replayed
    assert SEEN == drawn
    assert random.getstate() == before[0]
    assert repr(np.random.get_state(legacy=False)) == repr(before[1])


def test_a_failure_is_handed_to_hypothesis_and_shrunk_as_without_replay():
    run("at_most_the_limit")  # recorded
    replayed = run("at_most_the_limit", limit=50)
    replay.forget()
    drawn = run("at_most_the_limit", limit=50)
    assert replayed == drawn == ("failed: 51 is over the limit", {"x": 51})


def test_an_exception_hypothesis_does_not_catch_ends_the_replay_as_it_ends_hypothesis():
    run("at_most_the_limit")
    with pytest.raises(Stop) as replayed:
        run("at_most_the_limit", stop=50)
    replay.forget()
    with pytest.raises(Stop) as drawn:
        run("at_most_the_limit", stop=50)
    assert replayed.value.args == drawn.value.args


def test_interactive_draws_are_replayed_and_a_different_draw_hands_over():
    assert run("drawn_within")[0] == "passed"
    assert all(example.data == {"data"} for example in replay._RECORDED[key("drawn_within")])
    assert run("drawn_within")[0] == "passed"
    # A body that draws from another strategy than the recorded one: Hypothesis draws again.
    replayed = run("drawn_within", limit=500, wide=False)
    replay.forget()
    drawn = run("drawn_within", limit=500, wide=False)
    assert replayed == drawn and replayed[0] == "failed: 501 is over the limit"


def test_a_run_with_a_discarded_example_is_not_recorded():
    assert run("even_only")[0] == "passed"
    assert key("even_only") not in replay._RECORDED


def test_a_zoo_entry_graded_after_the_key_is_told_exactly_what_it_is_told_alone(tmp_path,
                                                                              monkeypatch):
    """The answer key records every check (as a batch's preload does); a wrong submission
    then replays, fails where it fails, and gets the same report as with nothing recorded."""
    from zoo.catalog import BY_NAME, build

    names = ["attention", "kv_cache"]
    engine.grade_submission(KIT / "solutions", exercises=names)
    assert len(replay._RECORDED) >= 10
    outcomes = []
    replayed_check = replay.replayed
    monkeypatch.setattr(replay, "replayed", lambda *args: outcomes.append(
        replayed_check(*args)) or outcomes[-1])
    for entry in ("attention_scale_by_dk", "kv_blocks_nothing"):
        submission = build(BY_NAME[entry], tmp_path)
        replayed = report.to_json(engine.grade_submission(submission, exercises=names))
        saved = dict(replay._RECORDED)
        replay.forget()
        drawn = report.to_json(engine.grade_submission(submission, exercises=names))
        replay._RECORDED.update(saved)
        assert json.dumps(replayed, sort_keys=True) == json.dumps(drawn, sort_keys=True)
        assert replayed["score"] < 35  # of 35: the entry is wrong
    assert outcomes.count(True) >= 10 and False in outcomes  # replayed, and handed over


def test_the_command_keeps_its_recordings_and_reads_them_back(tmp_path, monkeypatch):
    monkeypatch.setattr(replay, "CACHE", tmp_path / "replay")
    engine.grade_submission(KIT / "solutions", exercises=["softmax", "masks"])
    recorded = dict(replay._RECORDED)
    assert len(recorded) >= 10
    earlier = tmp_path / "replay" / "0123456789abcdef.pickle"  # an earlier kit's: never read
    earlier.parent.mkdir()
    earlier.write_bytes(b"recorded by an earlier version of the kit")
    replay.save_cache()
    (path,) = (tmp_path / "replay").iterdir()  # this kit's, in place of the earlier one
    assert path.stat().st_mode & 0o777 == 0o600
    replay.forget()
    replay.load_cache()
    assert replay._RECORDED.keys() == recorded.keys()
    for key, examples in recorded.items():
        assert repr(replay._RECORDED[key]) == repr(examples)


def test_a_recording_file_builds_plain_data_only(tmp_path, monkeypatch):
    """A file someone else slipped in is unusable, never run: no global outside plain data,
    NumPy arrays and the kit's records, and none not owned by the grading user."""
    monkeypatch.setattr(replay, "CACHE", tmp_path / "replay")
    path = replay.cache_file()
    path.parent.mkdir(parents=True)
    planted = tmp_path / "planted"

    class Payload:
        def __reduce__(self):
            return (open, (str(planted), "w"))

    path.write_bytes(pickle.dumps({("softmax", "x", "", 10, ("cpu",)): Payload()}))
    replay.load_cache()
    assert not planted.exists() and not replay._RECORDED
    with pytest.raises(pickle.UnpicklingError):
        replay.Unpickler(io.BytesIO(pickle.dumps(Payload()))).load()
    engine.grade_submission(KIT / "solutions", exercises=["softmax"])
    replay.save_cache()  # a good file, in place of the planted one
    replay.forget()
    os.chown(path, 65534, 65534)  # as root: a file of another user is not read at all
    replay.load_cache()
    assert not replay._RECORDED
    os.chown(path, os.geteuid(), os.getegid())
    replay.load_cache()
    assert replay._RECORDED


def test_a_moved_hypothesis_internal_stops_the_kit_with_one_sentence():
    """Where Hypothesis has moved an internal the kit relies on (grader/core/internals.py),
    importing the kit says so in one sentence, not a traceback."""
    import subprocess
    import sys

    moved = ("import hypothesis.internal.conjecture.providers as p; "
             "del p._get_local_constants; import grader.core.exercise")
    done = subprocess.run([sys.executable, "-c", moved], capture_output=True, text=True,
                          cwd=KIT, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0
    assert done.stderr.startswith("attention-kit cannot use Hypothesis 6.")
    assert "pip install 'hypothesis>=6.170,<6.171'" in done.stderr


class FirstCallWrong:
    """A student whose first answer is wrong and every later one right (a counter)."""

    stop, wide = None, True

    def __init__(self):
        self.calls = 0

    @property
    def limit(self) -> int:
        self.calls += 1
        return -1 if self.calls == 1 else 10_000


@pytest.mark.parametrize("recorded", [False, True])
def test_code_that_answers_differently_fails_whatever_was_recorded(recorded):
    """The red team's attack: a wrong first answer, absorbed when the check was handed from the
    replay to Hypothesis (whose first example then met the right answer). It is a failure with
    a recording as without: different results for the same input."""
    from hypothesis.errors import Flaky

    if recorded:
        run("at_most_the_limit")
    check = next(c for c in EX.checks if c.name == "at_most_the_limit")
    ctx = Context(FirstCallWrong())
    with pytest.raises(Flaky):
        check.run(ctx, examples=20)
    assert "x" in ctx.example


def test_flashs_reference_at_t_2048_is_computed_once_and_kept_with_the_examples(tmp_path,
                                                                                monkeypatch):
    """The memory check's float64 attention at T = 2048 (a quarter of a second) is computed by
    the first run, then read back: by a later grade in the same process, and by the next
    command from the kit's cache; the grade is the same each time."""
    from grader.problems import flash

    monkeypatch.setattr(replay, "CACHE", tmp_path / "replay")
    replay.forget()
    computed = []
    sdpa = flash.torch_sdpa

    def counting(case):
        computed.append(case.q.shape[-2])
        return sdpa(case)

    monkeypatch.setattr(flash, "torch_sdpa", counting)
    scores = []
    for run in range(3):
        if run == 2:  # the next command: what the cache holds, nothing else
            replay.save_cache()
            replay.forget()
            replay.load_cache()
        computed.clear()
        result = engine.grade_submission(KIT / "solutions", exercises=["flash"])
        scores.append(json.dumps(report.to_json(result), sort_keys=True))
        assert computed.count(flash.MEMORY_T) == (2 if run == 0 else 0)
    assert result.bonus_score == result.bonus_max_score
    assert scores[0] == scores[1] == scores[2]
