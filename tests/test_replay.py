"""Examples drawn once and replayed (``grader.core.replay``): a replayed check passes or fails
exactly as a drawn one does, says the same, and draws nothing when it passes."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
from types import SimpleNamespace

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from submission_tools import KIT

from grader.core import engine, one_pass, replay, replay_store
from grader.core.assertions import CheckFailed
from grader.core.exercise import Context, Exercise
from grader.integrations.outputs import report

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
    monkeypatch.setattr(replay_store, "CACHE", tmp_path / "replay")
    engine.grade_submission(KIT / "solutions", exercises=["softmax", "masks"])
    recorded = dict(replay._RECORDED)
    assert len(recorded) >= 10
    earlier = tmp_path / "replay" / "0123456789abcdef.pickle"  # an earlier kit's: never read
    earlier.parent.mkdir()
    earlier.write_bytes(b"recorded by an earlier version of the kit")
    replay_store.save_cache()
    (path,) = (tmp_path / "replay").iterdir()  # this kit's, in place of the earlier one
    assert path.stat().st_mode & 0o777 == 0o600
    replay.forget()
    replay_store.load_cache()
    assert replay._RECORDED.keys() == recorded.keys()
    for key, examples in recorded.items():
        assert repr(replay._RECORDED[key]) == repr(examples)


def test_a_recording_file_builds_plain_data_only(tmp_path, monkeypatch):
    """A file someone else slipped in is unusable, never run: no global outside plain data,
    NumPy arrays and the kit's records, and none not owned by the grading user."""
    monkeypatch.setattr(replay_store, "CACHE", tmp_path / "replay")
    path = replay_store.cache_file()
    path.parent.mkdir(parents=True)
    planted = tmp_path / "planted"

    class Payload:
        def __reduce__(self):
            return (open, (str(planted), "w"))

    path.write_bytes(pickle.dumps({("softmax", "x", "", 10, ("cpu",)): Payload()}))
    replay_store.load_cache()
    assert not planted.exists() and not replay._RECORDED
    with pytest.raises(pickle.UnpicklingError):
        replay_store.Unpickler(io.BytesIO(pickle.dumps(Payload()))).load()
    engine.grade_submission(KIT / "solutions", exercises=["softmax"])
    replay_store.save_cache()  # a good file, in place of the planted one
    replay.forget()
    os.chown(path, 65534, 65534)  # as root: a file of another user is not read at all
    replay_store.load_cache()
    assert not replay._RECORDED
    os.chown(path, os.geteuid(), os.getegid())
    replay_store.load_cache()
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

    monkeypatch.setattr(replay_store, "CACHE", tmp_path / "replay")
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
            replay_store.save_cache()
            replay.forget()
            replay_store.load_cache()
        computed.clear()
        result = engine.grade_submission(KIT / "solutions", exercises=["flash"])
        scores.append(json.dumps(report.to_json(result), sort_keys=True))
        assert computed.count(flash.MEMORY_T) == (2 if run == 0 else 0)
    assert result.bonus_score == result.bonus_max_score
    assert scores[0] == scores[1] == scores[2]


# -- a failing check's run, followed (replay.followed, student.Memo) -----------------------------
SCALE = "scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)"


def _attention(folder, name: str, source: str):
    """A submission: the key, with ``source`` as its attention.py."""
    submission = folder / name
    submission.mkdir()
    for path in sorted((KIT / "solutions").glob("*.py")):
        submission.joinpath(path.name).write_text(path.read_text())
    (submission / "attention.py").write_text(source)
    return submission


def _graded(submission) -> str:
    result = engine.grade_submission(submission, exercises=["attention"])
    return json.dumps(report.to_json(result, include_output=True), sort_keys=True)


@pytest.fixture(scope="module")
def unscaled_runs(tmp_path_factory):
    """The failing runs the unscaled attention keeps, graded after the key (as in a batch)."""
    replay.forget()
    key = (KIT / "solutions" / "attention.py").read_text()
    assert SCALE in key
    unscaled = _attention(tmp_path_factory.mktemp("unscaled"), "unscaled",
                          key.replace(SCALE, SCALE.replace(" / np.sqrt(d_k)", "")))
    engine.grade_submission(KIT / "solutions", exercises=["attention"])
    recordings = dict(replay._RECORDED)
    told = _graded(unscaled)
    runs = {k: v for k, v in replay._RECORDED.items() if replay.TRANSCRIPT in k}
    replay.forget()
    return SimpleNamespace(submission=unscaled, told=told, runs=runs, recordings=recordings)


def _with(recordings: dict, runs: dict | None = None) -> None:
    """This process's recordings: the key's examples, and ``runs`` kept."""
    replay.forget()
    replay._RECORDED.update(recordings)
    replay._RECORDED.update(runs or {})


@pytest.fixture
def followed(monkeypatch):
    """What ``replay.followed`` returned, call by call, and how many replies the memo served."""
    seen = {"returned": [], "served": 0}
    follow = replay.followed
    monkeypatch.setattr(replay, "followed", lambda *args, **kwargs: seen["returned"].append(
        follow(*args, **kwargs)) or seen["returned"][-1])
    from grader.core import student

    serve = student.Memo.request

    def counting(self, *args):
        before = self.served
        try:
            return serve(self, *args)
        finally:
            seen["served"] += self.served - before

    monkeypatch.setattr(student.Memo, "request", counting)
    return seen


def test_the_same_mistake_follows_a_kept_run_and_is_told_exactly_what_hypothesis_tells(
        unscaled_runs, followed):
    """A wrong attention fails four checks; Hypothesis shrinks each (about 70 runs of the
    check). Graded again, the kept runs are followed to their end instead, and the report is
    the same byte for byte as with nothing kept."""
    runs = unscaled_runs.runs
    assert len(runs) >= 3 and all(replay_store._is_run(steps) for steps in runs.values())
    assert '"score": 14' in unscaled_runs.told  # of 20: it is wrong
    _with(unscaled_runs.recordings, runs)
    again = _graded(unscaled_runs.submission)
    assert len(followed["returned"]) >= len(runs)
    assert sum(r is not None for r in followed["returned"]) == len(runs)  # to their end
    assert again == unscaled_runs.told


def test_code_that_leaves_a_kept_run_is_told_what_hypothesis_tells_it(tmp_path, unscaled_runs,
                                                                       followed):
    """Other wrong attentions, with the unscaled attention's runs kept: one with the same
    outcomes at every step follows them to their end; another leaves them at some step, and
    its checks run under Hypothesis from the start, served the replies so far rather than
    asking again. Each is told what it is told with nothing kept, byte for byte."""
    from zoo.catalog import BY_NAME, build

    seen = {}
    for name in ("attention_scale_by_dk", "attention_mask_after_softmax"):
        submission = build(BY_NAME[name], tmp_path)
        _with(unscaled_runs.recordings)
        alone = _graded(submission)
        _with(unscaled_runs.recordings, unscaled_runs.runs)
        followed["returned"].clear()
        served = followed["served"]
        assert _graded(submission) == alone, name
        seen[name] = (sum(r is not None for r in followed["returned"]),  # followed to the end
                      followed["served"] - served)  # replies served again
    assert seen["attention_scale_by_dk"][0] == 4  # / d_k fails where / 1 does
    assert seen["attention_mask_after_softmax"][0] == 0 < seen["attention_mask_after_softmax"][1]


STATEFUL = '''
_CALLS = [0]


def scaled_dot_product_attention(q, k, v, mask=None):
    """Right for seven calls, unscaled for the next seven, and so on: each answer depends on
    what was asked before, so asking a question twice would change what it says."""
    _CALLS[0] += 1
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError("shapes")
    scores = q @ np.swapaxes(k, -1, -2) / (np.sqrt(q.shape[-1]) if _CALLS[0] // 7 % 2 else 1.0)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != np.bool_:
            raise ValueError("mask must be boolean")
        scores = np.where(mask, -np.inf, scores)
    if np.any(np.all(np.isneginf(scores), axis=-1)):
        raise ValueError("a query has no allowed key")
    weights = softmax(scores, axis=-1)
    return weights @ v, weights
'''


def test_code_whose_answers_depend_on_its_history_is_asked_the_same_with_a_kept_run(
        tmp_path, unscaled_runs, followed):
    """What a kept run changes is only what the kit asks itself again: the student's code is
    asked the same questions in the same order whether a run was kept or not. Code that counts
    its calls would tell (a question asked twice moves its count): its report is the same
    with the unscaled attention's runs kept as without."""
    key = (KIT / "solutions" / "attention.py").read_text()
    head = key[:key.index("def scaled_dot_product_attention")]
    submission = _attention(tmp_path, "counting", head + STATEFUL)
    _with(unscaled_runs.recordings)
    alone = _graded(submission)
    assert '"status": "failed"' in alone and '"status": "passed"' in alone
    _with(unscaled_runs.recordings, unscaled_runs.runs)
    served = followed["served"]
    assert _graded(submission) == alone
    assert followed["served"] > served


@contextlib.contextmanager
def _softmax_worker(tmp_path, source: str):
    """A worker with ``source`` loaded as softmax.py, and its student proxy."""
    from grader.core.course import EXERCISES_BY_NAME
    from grader.core.student import Student
    from grader.sandbox.isolation import Sandbox

    os.chmod(tmp_path, 0o755)  # the worker may run as an unprivileged user
    staged, folder = tmp_path / "staged", tmp_path / "submission"
    staged.mkdir()
    folder.mkdir()
    (staged / "softmax.py").write_text(source)
    engine.copy_submission(staged, folder)
    with Sandbox(folder, "softmax", framework="numpy") as sandbox:
        student = Student(sandbox, EXERCISES_BY_NAME()["softmax"])
        student.load()
        yield student


COUNTING_SOFTMAX = """
import numpy as np
ASKED = [0]


def softmax(x, axis=-1):
    ASKED[0] += 1
    x = np.asarray(x, dtype=float)
    if x.min() < 0:
        raise ValueError(f"negative, call {ASKED[0]}")
    return x * 0 + ASKED[0]
"""


def test_a_reply_served_again_is_the_workers_own_and_asks_it_nothing(tmp_path):
    """After ``restart()`` the memo serves each question's reply again, decoded anew (the check
    may have changed the first copy), and a StudentError raised from where the worker's was:
    the same failure to Hypothesis. The worker, which counts its calls, is not asked again."""
    from grader.sandbox.errors import StudentError

    with _softmax_worker(tmp_path, COUNTING_SOFTMAX) as student, student.memoizing() as memo:
        outcomes, replies = [], []
        for _ in range(2):
            try:
                student.softmax([-1.0, 2.0])
            except StudentError as error:
                outcomes.append((replay.outcome(error), error.info["message"]))
            reply = student.softmax([1.0, 2.0])
            replies.append(reply.tolist())
            reply[0] = 99.0  # changed by the check: not what is served again
            memo.restart()
        assert outcomes[0] == outcomes[1] and outcomes[0][0][0] == "failed"
        assert outcomes[0][1] == "negative, call 1"
        assert replies == [[2.0, 2.0]] * 2 and memo.served == 2
        # Every kept reply served: from now on the worker answers, and nothing is kept.
        assert student.softmax([1.0, 2.0]).tolist() == [3.0, 3.0]
        assert not memo.serving and not memo.keeping


def test_a_question_other_than_the_next_one_kept_goes_to_the_worker(tmp_path):
    with _softmax_worker(tmp_path, COUNTING_SOFTMAX) as student, student.memoizing() as memo:
        student.softmax([1.0])
        student.softmax([2.0])
        memo.restart()
        assert student.softmax([5.0]).tolist() == [3.0]  # not [1.0]: asked, the third call
        assert student.softmax([2.0]).tolist() == [4.0] and memo.served == 0


def test_a_memo_past_its_cap_stops_the_following_after_the_step_and_keeps_what_was_asked(
        tmp_path):
    """Replies of a file that answers with big arrays: the memo keeps every one already asked
    (serving them is what keeps the questions the same) and says ``full``, so that following
    stops after the step it is in; a restart serves them all."""
    from grader.core.student import Memo

    big = "import numpy as np\n\ndef softmax(x, axis=-1):\n    return np.zeros(1 << 20)\n"
    with _softmax_worker(tmp_path, big) as student, student.memoizing() as memo:
        student.softmax([0.0])  # 8 MiB
        assert not memo.full
        student.softmax([1.0])
        assert memo.full and memo._bytes > Memo.MAX_BYTES
        student.softmax([2.0])  # later in the same step: kept all the same
        assert len(memo._kept) == 3
        memo.restart()
        for x in range(3):
            assert student.softmax([float(x)]).shape == (1 << 20,)
        assert memo.served == 3


DEEP = '''
CALLS = [0]


def scaled_dot_product_attention(q, k, v, mask=None):
    """Wrong throughout (2 * output + 1); its second answer a tuple in a tuple ... 490 deep,
    which the grading process decodes only with the stack Hypothesis gives a run."""
    CALLS[0] += 1
    out, weights = right(q, k, v, mask)
    if CALLS[0] == 2:
        for _ in range(490):
            out, weights = (out,), (weights,)
        return out, weights
    return out * 2.0 + 1.0, weights
'''


def test_a_deeply_nested_reply_is_decoded_alike_followed_or_drawn(tmp_path, unscaled_runs,
                                                                  followed, monkeypatch):
    """A red team's reply: followed at the process's own recursion limit (1000, as on the
    command line), it failed to decode and cost the whole exercise (0/20), where Hypothesis,
    which gives each run 2000 frames, decoded it (14/20). A followed or replayed example runs
    with Hypothesis's limit, at the same depth."""
    import sys

    monkeypatch.setattr(sys, "getrecursionlimit", sys.getrecursionlimit)  # restored after
    sys.setrecursionlimit(1000)
    key = (KIT / "solutions" / "attention.py").read_text()
    right = key.replace("def scaled_dot_product_attention(", "def right(")
    submission = _attention(tmp_path, "deep", right + DEEP)
    _with(unscaled_runs.recordings)
    # In one pass (grader.core.one_pass) the deep reply is read at the pass, then again where
    # a check reads it: never malformed (the call it answers differs: the code counts calls).
    together = _graded(submission)
    assert "malformed" not in together
    assert json.loads(together)["extra_data"]["exercises"]["attention"]["score"] >= 13
    # Asked alone, call by call, followed or drawn, as the rest of this test compares.
    monkeypatch.setattr(one_pass, "plan_for", lambda *args, **kwargs: {})
    alone = _graded(submission)
    assert "malformed" not in alone and '"score": 14' in alone
    _with(unscaled_runs.recordings, unscaled_runs.runs)
    followed["returned"].clear()
    assert _graded(submission) == alone
    assert any(r is None for r in followed["returned"])  # it left a run: Hypothesis ran too
    assert followed["served"] > 0  # the deep reply among them: decoded again, not copied


class _Scripted:
    """A made-up student for attention's future-position check, whose answers depend on its
    call count (``behaviour(n, q, k, v)``: "pass", "raise" or "future"), with the memo's
    contract: after ``restart()`` each question asked before is answered as it was."""

    def __init__(self, behaviour):
        self.behaviour, self.calls, self.memo = behaviour, 0, None

    @contextlib.contextmanager
    def memoizing(self):
        self.memo = SimpleNamespace(kept=[], keeping=True, serving=False, next=0, full=False)
        self.memo.restart = lambda: vars(self.memo).update(
            keeping=False, serving=bool(self.memo.kept), next=0)
        try:
            yield self.memo
        finally:
            self.memo = None

    def scaled_dot_product_attention(self, q, k, v, mask=None):
        import numpy as np

        from grader.problems.attention import scaled_dot_product_attention as reference

        memo, question = self.memo, (q.tobytes(), q.shape, k.tobytes(), v.tobytes())
        if memo is not None and memo.serving and memo.kept[memo.next][0] == question:
            answer = memo.kept[memo.next][1]
            memo.next += 1
            memo.serving = memo.next < len(memo.kept)
        else:
            if memo is not None:
                memo.serving = False
            self.calls += 1
            answer = self.behaviour(self.calls, q, k, v)
            if memo is not None and memo.keeping:
                memo.kept.append((question, answer))
        if answer == "raise":
            raise ValueError("raised")
        out, weights = reference(q, k, v, mask)
        if answer == "future":
            weights = weights + np.triu(np.ones(weights.shape[-2:]), 1) * 0.1
        return out, weights


def test_two_kept_runs_with_the_same_outcomes_but_not_the_same_draws_are_not_mixed():
    """The second red team's chimera: two students' runs of attention's future-position check
    share every outcome up to a step but not the draws its body asked for (it draws a position
    only after the first call passes), so Hypothesis went on differently for each. A third
    student who left the first run there was put on the second one's later steps, which
    Hypothesis would never have run for it, and was told something else than alone. Runs are
    now taken for one another only where they also made the same choices."""
    from grader.core.course import EXERCISES_BY_NAME

    check = next(c for c in EXERCISES_BY_NAME()["attention"].checks
                 if c.name == "test_no_weight_on_future_positions")
    seen = {}

    def first(n, q, k, v):  # fails on its first failing input, raises on every other
        if n <= 6:
            return "pass"
        seen.setdefault("case", (q.tobytes(), q.shape, k.tobytes(), v.tobytes()))
        return "future" if seen["case"] == (q.tobytes(), q.shape, k.tobytes(), v.tobytes()) \
            else "raise"

    def second(n, q, k, v):
        return "pass" if n <= 6 or not (q.any() and v.max() > 3) else "raise"

    def victim(n, q, k, v):
        return "raise" if n == 7 else second(n, q, k, v)

    def told(behaviour):
        ctx = Context(_Scripted(behaviour))
        try:
            check.run(ctx, examples=10)
            error = None
        except BaseException as raised:
            error = repr(raised)
        return error, engine._inputs(ctx), ctx.student.calls

    alone = told(victim)
    replay.forget()
    told(first)
    told(second)
    assert len([k for k in replay._RECORDED if replay.TRANSCRIPT in k]) == 2
    assert told(victim) == alone
