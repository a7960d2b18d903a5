"""make demo-class: the class the instructors' guide walks ``batch --report`` through shows
what it says it does (tests/demo_class.py). It is graded as part of the golden class
(``golden_class``: the demo's six, two more students and a roster), its hang stopped at a
0.5 s call limit (2 s by default) to keep the test short."""

from __future__ import annotations

import csv
import io
import json

import demo_class


def test_the_demo_class_grades_as_its_guide_says(golden_class):
    lines = csv.DictReader(io.StringIO(golden_class["class/grades.csv"]))
    rows = {r["student"]: r for r in lines if r["student"] in demo_class.STUDENTS}
    assert sorted(rows) == sorted(demo_class.STUDENTS)
    assert rows["ana"]["total"] == rows["eve"]["total"] == "100"

    def graded(student: str) -> dict:
        return json.loads(golden_class[f"class/json/{student}.json"])

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
    summary = json.loads(golden_class["class/report/summary.json"])
    demo = set(demo_class.STUDENTS)  # (gus, beside them, has the key's files, as fay has some)
    flagged = {(tuple(p["students"]), p["exercise"]) for p in summary["similarity"]["pairs"]
               if set(p["students"]) <= demo}
    assert flagged == {(("eve", "fay"), "attention"), (("eve", "fay"), "mha")}
    assert not [g for g in summary["similarity"]["identical"] if len(demo & set(g["students"])) > 1]
