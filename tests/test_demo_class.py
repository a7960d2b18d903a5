"""make demo-class: the class the instructors' guide walks ``batch --report`` through shows
what it says it does (tests/demo_class.py). Its hang is stopped at a 0.5 s call limit here
(2 s by default) to keep the test short."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import demo_class
from submission_tools import KIT


def test_the_demo_class_grades_as_its_guide_says(tmp_path):
    demo_class.write(tmp_path / "demo")
    done = subprocess.run(
        [sys.executable, "-m", "grader", "batch", str(tmp_path / "demo"), "--csv",
         str(tmp_path / "grades.csv"), "--json-dir", str(tmp_path / "json"), "--report",
         str(tmp_path / "report"), "--call-timeout", "0.5"],
        cwd=KIT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    with (tmp_path / "grades.csv").open() as handle:
        rows = {r["student"]: r for r in csv.DictReader(handle)}
    assert sorted(rows) == sorted(demo_class.STUDENTS)
    assert rows["ana"]["total"] == rows["eve"]["total"] == "100"

    def graded(student: str) -> dict:
        return json.loads((tmp_path / "json" / f"{student}.json").read_text())

    ben = graded("ben")["extra_data"]["exercises"]["softmax"]
    assert ben["score"] < 15 and ben["misconceptions"] == ["softmax-global-shift"]
    assert int(rows["ben"]["total"]) == 85 + ben["score"]
    assert int(rows["cy"]["heads"]) < 10
    stopped = [t["name"] for t in graded("cy")["tests"]
               if "more than 0.5 s of CPU time and was stopped" in t["output"]]
    assert stopped and all(name.startswith("heads: ") for name in stopped)
    assert rows["dee"]["softmax_backward"] == "0"
    assert "NameError: name 'TOLERENCE' is not defined" in graded("dee")["instructor"][
        "errors"]["softmax_backward"]
    fay = graded("fay")["extra_data"]["exercises"]["kv_cache"]
    assert rows["fay"]["kv_cache"] == "0" and fay["attempted"] is False
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    flagged = {(tuple(p["students"]), p["exercise"]) for p in summary["similarity"]["pairs"]}
    assert flagged == {(("eve", "fay"), "attention"), (("eve", "fay"), "mha")}
    assert summary["similarity"]["identical"] == []
