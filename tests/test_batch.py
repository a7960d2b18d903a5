"""Batch grading: one row per student, broken submissions included (identical on a rerun:
``test_golden``)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from submission_tools import BONUS, CORE, KIT, grader_command, make_submission

EXERCISES = KIT / "exercises"


def build_class(root: Path) -> None:
    make_submission(root / "ada.lovelace@uni.edu", {})
    make_submission(root / "bob-stubs", {}, base=EXERCISES)
    make_submission(root / "carol.syntax", {f"{name}.py": "def (:\n" for name in (
        "softmax", "softmax_backward", "attention", "heads", "mha", "kv_cache")}, base=None)
    make_submission(root / "dave_exits", {"softmax.py": "import os\nos._exit(9)\n"},
                    base=EXERCISES)
    (root / "eve-too-big").mkdir()
    (root / "eve-too-big" / "weights.bin").write_bytes(b"\0" * (21 << 20))
    (root / "frank.txt").write_text("a file, not a folder\n")
    (root / "gina-empty").mkdir()
    (root / "gina-empty" / ".DS_Store").write_text("")


def batch(root: Path, out: Path) -> subprocess.CompletedProcess:
    # Past the source rule (dave's `import os` would stop there): the crash is what is tested.
    return subprocess.run(
        grader_command(sys.executable, "batch", str(root), "--csv", str(out / "grades.csv"),
                       "--json-dir", str(out / "json"), "--jobs", "2", rule=False),
        capture_output=True, text=True, cwd=KIT, timeout=300,
    )


def test_batch_grades_every_student(tmp_path):
    root = tmp_path / "class"
    build_class(root)
    first = batch(root, tmp_path / "first")
    assert first.returncode == 0, first.stderr
    assert "6/6" in first.stderr and "ETA" in first.stderr
    with open(tmp_path / "first" / "grades.csv", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["student", "softmax", "softmax_backward", "attention", "heads", "mha",
                       "kv_cache", "total", "status", *BONUS, "bonus_total"]
    table = {row[0]: row[1:9] for row in rows[1:]}
    bonus = {row[0]: row[9:] for row in rows[1:]}
    assert [row[0] for row in rows[1:]] == sorted(table)
    assert table["ada.lovelace@uni.edu"] == ["15", "15", "20", "10", "25", "15", "100", "graded"]
    assert bonus["ada.lovelace@uni.edu"] == ["10"] * len(BONUS) + [str(10 * len(BONUS))]
    assert table["bob-stubs"] == ["0"] * 7 + ["graded"]
    assert bonus["bob-stubs"] == [""] * len(BONUS) + ["0"]  # untouched stubs: not attempted
    assert table["carol.syntax"] == ["0"] * 7 + ["graded"]
    assert bonus["carol.syntax"] == [""] * len(BONUS) + ["0"]  # no bonus files: not attempted
    assert table["dave_exits"] == ["0"] * 7 + ["graded"]
    assert table["eve-too-big"][:7] == [""] * 7 and "more than 20 MiB" in table["eve-too-big"][7]
    assert "frank.txt" not in table  # a stray file is not a student
    assert "warning: skipped frank.txt: not a folder" in first.stderr
    assert table["gina-empty"] == [""] * 7 + ["empty"]  # nothing was submitted
    assert bonus["gina-empty"] == [""] * (len(BONUS) + 1)
    json_files = sorted(p.name for p in (tmp_path / "first" / "json").glob("*.json"))
    assert json_files == [f"{s}.json" for s in ("ada.lovelace@uni.edu", "bob-stubs",
                                                "carol.syntax", "dave_exits")]
    dave = json.loads((tmp_path / "first" / "json" / "dave_exits.json").read_text())
    assert "exit code 9" in dave["instructor"]["errors"]["softmax"]
    # That a rerun writes the same bytes, tests/test_golden.py holds: a class graded in every
    # session against the files kept from the first.


def test_a_graders_failing_runs_are_followed_by_the_graders_forked_after_it(tmp_path,
                                                                            monkeypatch):
    """The first of three students with the same mistake fails four attention checks under
    Hypothesis; its grader sends the runs it kept to the batch, and the two graders forked
    after it follow them (and so keep none of their own). All three are told the same."""
    from grader.core import replay
    from grader.core.course import load
    from grader.integrations.outputs import report
    from grader.integrations.routes import batch as batches

    unscaled = (KIT / "solutions" / "attention.py").read_text().replace(" / np.sqrt(d_k)", "", 1)
    for name in ("student-1@uni.edu", "student-2@uni.edu", "student-3@uni.edu"):
        make_submission(tmp_path / "class" / name, {"attention.py": unscaled})
    only = tmp_path / "course.toml"  # attention alone (and softmax, which it imports)
    only.write_text("".join(f"[exercises.{name}]\nenabled = false\n"
                            for name in (*CORE, *BONUS) if name not in ("attention", "softmax")))
    sent = []
    adopt = batches._adopt_runs
    monkeypatch.setattr(batches, "_adopt_runs", lambda reply: sent.append(
        batches._runs_file(reply).is_file()) or adopt(reply))
    replay.forget()
    try:
        rows = batches.run(tmp_path / "class", jobs=1, key_folder=KIT / "solutions",
                           course=load(only), progress=None)
        assert sent == [True, False, False]
        assert sum(replay.TRANSCRIPT in k for k in replay._RECORDED) >= 3
    finally:
        replay.forget()
    assert [row.scores["attention"] for row in rows] == [rows[0].scores["attention"]] * 3 < [20]
    told = {json.dumps(report.to_json(row.result, include_output=True), sort_keys=True)
            .replace(row.student, "S") for row in rows}
    assert len(told) == 1


def test_a_broken_runs_file_adds_nothing_and_stops_nothing(tmp_path, monkeypatch):
    """What the batch reads from a grader is checked before it is kept: a file that is not a
    recording, holds code to run, is too big, is another user's, holds anything but whole
    failing runs, or would take the batch's runs past their cap adds nothing."""
    import os
    import pickle

    from grader.core import replay
    from grader.integrations.routes import batch as batches

    class Payload:
        def __reduce__(self):
            return (open, (str(tmp_path / "planted"), "w"))

    check = ("attention", "test_matches_torch_sdpa", "0" * 16, 10, ("cpu",))
    example = replay.Example({"x": 1}, frozenset())
    failed = ("failed", ("ValueError", "f.py", 1, (), ()))
    made = "0" * 32  # the digest of a step's choices
    broken = [
        b"not a pickle",
        pickle.dumps({(*check, replay.TRANSCRIPT, "a"): Payload()}),
        pickle.dumps({check: (example,)}),  # a passing recording: not what a grader sends
        pickle.dumps({(*check, replay.TRANSCRIPT, "b"): ((example, replay.PASSED, made),)}),
        pickle.dumps({(*check, replay.TRANSCRIPT, "c"): ((example, failed, made),) * 5000}),
        pickle.dumps({(*check, replay.TRANSCRIPT, "d"): (("not an example", failed, made),)}),
        pickle.dumps({(*check, replay.TRANSCRIPT, "e"): ((example, failed),)}),  # no choices
        pickle.dumps({(*check, replay.TRANSCRIPT, "f"): ((example, failed, 7),)}),
    ]
    replay.forget()
    try:
        for index, data in enumerate(broken):
            reply = tmp_path / f"{index}.json"
            batches._runs_file(reply).write_bytes(data)
            batches._adopt_runs(reply)
        reply = tmp_path / "big.json"
        batches._runs_file(reply).write_bytes(b"\0" * (batches.MAX_RUNS_BYTES + 1))
        batches._adopt_runs(reply)
        assert not replay._RECORDED and not (tmp_path / "planted").exists()
        good = pickle.dumps({(*check, replay.TRANSCRIPT, "g"): ((example, failed, made),)})
        reply = tmp_path / "good.json"
        batches._runs_file(reply).write_bytes(good)
        os.chown(batches._runs_file(reply), 65534, 65534)  # as root: another user's file
        batches._adopt_runs(reply)
        assert not replay._RECORDED
        os.chown(batches._runs_file(reply), os.geteuid(), os.getegid())
        batches._adopt_runs(reply)
        assert len(replay._RECORDED) == 1
        # Past the batch's cap on runs in all, no more are kept.
        more = pickle.dumps({(*check, replay.TRANSCRIPT, "h"): ((example, failed, made),)})
        monkeypatch.setattr(batches, "MAX_BATCH_RUNS_BYTES",
                            batches._ADOPTED[0] + len(more) - 1)
        batches._runs_file(reply).write_bytes(more)
        batches._adopt_runs(reply)
        assert len(replay._RECORDED) == 1
    finally:
        replay.forget()
