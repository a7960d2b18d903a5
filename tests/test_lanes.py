"""Exercises graded side by side (``grader.core.lanes``): the same results, in the same order,
as one after another; a lane that fails costs nothing; what a lane recorded reaches the
grading process; and what comes back over a lane's pipe is read as data, never run."""

from __future__ import annotations

import json
import os
import pickle
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from submission_tools import make_submission
from zoo.catalog import BY_NAME, build

from grader.core import engine, lanes, replay, replay_store
from grader.integrations.outputs import report
from grader.sandbox import cgroups


@dataclass
class Result:
    name: str
    pid: int
    checks: list[dict] = field(default_factory=list)


def rebuild(fields: dict) -> Result:
    return Result(**fields)


def test_results_come_back_by_name_in_the_order_asked():
    parent = os.getpid()
    found = lanes.graded(["c", "a", "b"], lambda name: Result(name, os.getpid()), 2, rebuild)
    assert list(found) == ["c", "a", "b"]
    assert [r.name for r in found.values()] == ["c", "a", "b"]
    assert all(r.pid != parent for r in found.values())  # each graded in a lane
    assert len({r.pid for r in found.values()}) == 2  # two lanes: one of them graded two


def test_a_lane_grades_one_exercise_after_another():
    """A lane is forked once and then sent names: with two lanes, five exercises take two
    forks, and a lane's second exercise finds what its first left in the process."""
    def grade(name: str) -> Result:
        seen = list(GRADED)
        GRADED.append(name)
        return Result(name, os.getpid(), [{"before": seen}])

    found = lanes.graded(["a", "b", "c", "d", "e"], grade, 2, rebuild)
    assert len({r.pid for r in found.values()}) == 2
    assert any(r.checks[0]["before"] for r in found.values())
    assert not GRADED  # graded in the lanes, not here


GRADED: list[str] = []


def test_a_pool_keeps_its_lanes_from_one_round_to_the_next(monkeypatch):
    """``grader.core.phases`` sends the same lanes every visible phase, then every hidden one
    (a line of its own per name): no lane is forked again, and none outlives the pool."""
    monkeypatch.setattr(lanes, "_SECONDS", {})
    with lanes.Pool(lambda line: Result(line, os.getpid()), 2) as pool:
        first = pool.graded(["a", "b", "c"], rebuild)
        second = pool.graded(["a", "b"], rebuild, task=lambda name: f"{name}!", phase="hidden")
        pids = [lane.pid for lane in pool.running]
    assert len(pids) == 2 and {r.pid for r in first.values()} == set(pids)
    assert {r.pid for r in second.values()} <= set(pids)
    assert [r.name for r in second.values()] == ["a!", "b!"] and list(second) == ["a", "b"]
    assert {"a", "b", "c", "a (hidden)", "b (hidden)"} == set(lanes._SECONDS)
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reaped


def test_one_lane_grades_here():
    parent = os.getpid()
    found = lanes.graded(["a", "b"], lambda name: Result(name, os.getpid()), 1, rebuild)
    assert {r.pid for r in found.values()} == {parent}


def test_a_lane_that_raises_or_is_killed_is_graded_again_here():
    parent = os.getpid()

    def grade(name: str) -> Result:
        if os.getpid() != parent and name == "raises":
            raise RuntimeError("the kit's own bug, in a lane")
        if os.getpid() != parent and name == "killed":
            os.kill(os.getpid(), signal.SIGKILL)
        return Result(name, os.getpid())

    found = lanes.graded(["fine", "raises", "killed"], grade, 3, rebuild)
    assert found["fine"].pid != parent
    assert found["raises"].pid == parent and found["killed"].pid == parent


def test_a_reply_that_would_run_code_is_not_read():
    class Payload:
        def __reduce__(self):
            return (os.system, ("touch /tmp/attention-kit-lane-pwned",))

    data = pickle.dumps({"result": {"name": "x"}, "recordings": Payload()})
    assert lanes._read(data) is None
    assert not os.path.exists("/tmp/attention-kit-lane-pwned")
    assert lanes._read(b"not a pickle") is None
    assert lanes._read(pickle.dumps(["a list"])) is None


def same(report_json: dict) -> str:
    """The report as text, less the grading run's temporary folder (a warning's path names it)."""
    return re.sub(r"/tmp/attention-kit-[^/]+/", "TMP/", json.dumps(report_json, sort_keys=True))


def test_side_by_side_grading_reports_what_one_after_another_does(tmp_path):
    """Four exercises with a typical mistake each (failing checks, shrunk examples, hints), one
    with its file missing: the JSON report is the same, byte for byte; and the examples the
    lanes drew are the grading process's to keep."""
    folder = build(BY_NAME["softmax_overflow"], tmp_path / "one")
    for entry in ("attention_mask_after_softmax", "heads_split_scrambled", "kv_upper_left"):
        source = build(BY_NAME[entry], tmp_path / entry)
        name = BY_NAME[entry].exercise
        (folder / f"{name}.py").write_text((source / f"{name}.py").read_text())
    (folder / "softmax_backward.py").unlink()
    chosen = ["softmax", "softmax_backward", "attention", "heads", "kv_cache"]
    replay.forget()
    serial = engine.grade_submission(folder, exercises=chosen, jobs=1)
    replay.forget()
    side = engine.grade_submission(folder, exercises=chosen, jobs=3)
    assert same(report.to_json(side, include_output=True)) == same(
        report.to_json(serial, include_output=True))
    assert serial.score < serial.max_score
    kept = replay_store.named()
    assert {exercise for exercise, *_ in kept} >= {"softmax", "attention", "heads", "kv_cache"}


def test_the_answer_key_scores_full_side_by_side(tmp_path):
    result = engine.grade_submission(make_submission(tmp_path / "key"), jobs=4)
    assert result.score == result.max_score
    assert result.bonus_score == result.bonus_max_score


def test_a_lane_ends_with_its_grading_process(tmp_path):
    """The red team's grader, stopped: its lanes went on grading (and started a zygote of their
    own) for a minute. Each lane now ends when the process that forked it does."""
    marks = tmp_path / "lanes"
    marks.mkdir()
    grading = os.fork()
    if grading == 0:  # a grading process whose lanes each note their pid, then work on
        def grade(name: str) -> Result:
            (marks / name).write_text(str(os.getpid()))
            time.sleep(60)
            return Result(name, os.getpid())

        try:
            lanes.graded(["a", "b"], grade, 2, rebuild)
        finally:
            os._exit(0)
    deadline = time.monotonic() + 30
    while len(list(marks.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = [int(p.read_text()) for p in marks.iterdir()]
    assert len(pids) == 2
    os.kill(grading, signal.SIGKILL)
    os.waitpid(grading, 0)
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in pids)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(cgroups.available() is not None, reason="no cgroups here")
def test_lanes_leave_no_group_behind(tmp_path):
    """The red team found each lane's answer-key workers and their groups left after every
    `grade`: a lane now closes its workers and removes its groups before it ends."""
    def groups() -> set[Path]:
        return {g for folder in cgroups._kit_folders().values() for g in folder.glob("g*")}

    before = groups()
    engine.grade_submission(make_submission(tmp_path / "key"),
                            exercises=["softmax", "attention", "mha"], jobs=3)
    left = [g for g in groups() - before if not alive(int(g.name[1:]))]
    assert not left


def test_the_longest_exercise_starts_first_and_each_lane_is_timed(monkeypatch):
    """Each lane's seconds are noted; the next run starts the longest first (those never timed
    after, in the order asked), and the results come back in the order asked all the same."""
    monkeypatch.setattr(lanes, "_SECONDS", {})
    forked: list[str] = []  # the order in which the lanes were given the names
    send = lanes._send

    def noting(lane, name, line):
        forked.append(name)
        return send(lane, name, line)

    monkeypatch.setattr(lanes, "_send", noting)

    def grade(name: str) -> Result:
        time.sleep({"slow": 0.3, "quick": 0.0}.get(name, 0.1))
        return Result(name, os.getpid())

    found = lanes.graded(["quick", "slow", "new"], grade, 2, rebuild)
    assert forked == ["quick", "slow", "new"]  # nothing timed yet: the order asked
    assert list(found) == ["quick", "slow", "new"]
    assert set(lanes._SECONDS) == {"quick", "slow", "new"}
    assert lanes._SECONDS["slow"] >= 0.3 and lanes._SECONDS["slow"] > lanes._SECONDS["quick"]
    lanes._SECONDS.pop("new")
    assert lanes.longest_first(["quick", "new", "slow", "other"]) == [
        "slow", "quick", "new", "other"]
    forked.clear()
    found = lanes.graded(["quick", "new", "slow"], grade, 2, rebuild)
    assert forked == ["slow", "quick", "new"]
    assert list(found) == ["quick", "new", "slow"]


def test_the_seconds_are_kept_for_the_next_run_and_a_bad_file_is_ignored(tmp_path,
                                                                          monkeypatch):
    path = tmp_path / "lanes.json"
    monkeypatch.setattr(lanes, "_SECONDS", {"softmax": 0.25, "flash": 1.5})
    lanes.save_seconds(path)
    assert path.stat().st_mode & 0o777 == 0o600
    monkeypatch.setattr(lanes, "_SECONDS", {})
    lanes.load_seconds(path)
    assert lanes._SECONDS == {"flash": 1.5, "softmax": 0.25}
    for text in ("not json", "[1, 2]", '{"a": "slow", "b": -1, "c": NaN, "d": true}'):
        monkeypatch.setattr(lanes, "_SECONDS", {})
        path.write_text(text)
        lanes.load_seconds(path)
        assert lanes._SECONDS == {}
    lanes.load_seconds(tmp_path / "missing.json")
    assert lanes._SECONDS == {}


@pytest.mark.parametrize(("cpus", "expected"), [(1, 1), (2, 3), (3, 4), (16, 4)])
def test_grade_runs_one_lane_more_than_the_cpus_at_most_four(monkeypatch, cpus, expected):
    monkeypatch.setattr(lanes, "usable_cpus", lambda: cpus)
    assert lanes.default_lanes() == expected
