"""The class report and the gradebook exports, on the batch bench's generated class of 200.

Grading 200 submissions takes minutes, and grading is deterministic, so the class's distinct
submissions (one correct, three with planted mistakes, the hostile kinds) are graded once, by
``python -m grader batch``, and each student's JSON is that of their submission's kind.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from browser_tools import Browser, ensure_chromium, find_chromium, save
from submission_tools import COURSE, KIT

from grader.core import records
from grader.integrations.outputs import class_report, exports
from tools.bench import WRONG, make_class

SIZE = 200
SCREENSHOTS = KIT / "build" / "screenshots"
HOSTILE_NAME = "<img src=x onerror=console.error(document.title)>"  # an empty folder
PLANTED = {"softmax.py": "softmax-overflow",  # WRONG's mistakes that have a misconception id
           "attention.py": "scale-missing"}
FILES = ("summary.json", "summary.md", "index.html")


def grader(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", *map(str, args)], cwd=KIT,
                          capture_output=True, text=True, timeout=600)


def digest(folder: Path) -> str:
    return hashlib.sha256(b"".join(p.name.encode() + p.read_bytes()
                                   for p in sorted(folder.iterdir()))).hexdigest()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class of 200, its distinct submissions graded by ``batch`` (with a roster, both
    exports and ``--report``), and every student's JSON and CSV row."""
    root = tmp_path_factory.mktemp("bench-class")
    kinds = make_class(root / "class", SIZE)
    students = sorted(p.name for p in (root / "class").iterdir())
    kind_of, representative = {}, {}
    for student in students:
        key = digest(root / "class" / student)
        representative.setdefault(key, student)
        kind_of[student] = representative[key]
    distinct = root / "distinct"
    for student in set(representative.values()):
        shutil.copytree(root / "class" / student, distinct / student)
    (distinct / HOSTILE_NAME).mkdir()
    reps = sorted(representative.values())
    with open(root / "roster.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["folder", "id", "name", "email", "section"])
        for number, student in enumerate(reps[1:]):  # reps[0]: a folder not in the roster
            writer.writerow([student, 5000 + number, f"Student {number}", student, "A1"])
        writer.writerow([reps[1], 6001, "Same Folder Again", "again@example.edu", "A2"])
        writer.writerow(["gone@example.edu", 6002, "Never Submitted", "gone@example.edu", "B"])
    out = root / "out"
    run = grader("batch", distinct, "--csv", out / "grades.csv", "--json-dir", out / "json",
                 "--report", out / "report", "--roster", root / "roster.csv",
                 "--export", "canvas", out / "canvas.csv", "--export", "gradescope",
                 out / "gradescope.csv", "--jobs", 2, "--timeout", 15, "--memory", 1)
    assert run.returncode == 0, run.stderr
    # Every student of the 200 gets their kind's JSON (the folder name inside replaced).
    json_dir = root / "json200"
    (json_dir / records.FOLDER).mkdir(parents=True)
    for student in students:
        for kept in (Path(f"{kind_of[student]}.json"),
                     Path(records.FOLDER, f"{kind_of[student]}.json")):
            text = (out / "json" / kept).read_text()
            (json_dir / kept.parent / f"{student}.json").write_text(
                text.replace(kind_of[student], student))
    rows = class_report.load_rows(json_dir)
    assert len(rows) == SIZE and kinds == {"correct": 130, "wrong": 40, "hostile": 30}
    summary_dir = root / "report200"
    class_report.build(rows, COURSE, summary_dir)
    return {"root": root, "out": out, "stderr": run.stderr, "kind_of": kind_of,
            "json_dir": json_dir, "report200": summary_dir,
            "summary": json.loads((summary_dir / "summary.json").read_text())}


def test_summary_counts_equal_those_computed_from_the_per_student_json(graded):
    results = {p.stem: json.loads(p.read_text()) for p in graded["json_dir"].glob("*.json")}
    summary = graded["summary"]
    assert summary["class"] == {"students": SIZE, "graded": SIZE, "points_possible": 100,
                                "core": list(COURSE.names("core")),
                                "bonus": list(COURSE.names("bonus"))}
    assert summary["statuses"] == {"graded": {"count": SIZE, "students": sorted(results)}}
    for name in COURSE.names("core"):
        scores = [r["extra_data"]["exercises"][name]["score"] for r in results.values()]
        stats = summary["exercises"][name]
        assert stats["graded"] == SIZE
        assert stats["mean"] == pytest.approx(statistics.fmean(scores), abs=0.006)
        assert stats["median"] == statistics.median(scores)
        assert stats["full_marks"] == sum(s == COURSE.points(name) for s in scores)
        assert sum(b["count"] for b in stats["histogram"]) == SIZE
        assert stats["histogram"][-1]["count"] == stats["full_marks"]
    totals = [r["score"] for r in results.values()]
    assert summary["total"]["mean"] == pytest.approx(statistics.fmean(totals), abs=0.006)
    assert set(summary["checks"]) == {t["name"] for r in results.values() for t in r["tests"]
                                      if "bonus" not in t["tags"]}  # nobody tried the bonus
    for check, entry in summary["checks"].items():
        outcomes = {s: t["status"] for s, r in results.items() for t in r["tests"]
                    if t["name"] == check}
        assert entry["students"] == len(outcomes)
        assert entry["passed"] == sum(o == "passed" for o in outcomes.values())
        assert entry["failed_students"] == sorted(s for s, o in outcomes.items()
                                                  if o != "passed")
    shown = {}
    for student, r in sorted(results.items()):
        for exercise in r["extra_data"]["exercises"].values():
            for mid in exercise["misconceptions"]:
                shown.setdefault(mid, set()).add(student)
    assert {m: set(e["students"]) for m, e in summary["misconceptions"].items()} == shown
    assert [e["count"] for e in summary["misconceptions"].values()] == sorted(
        (len(s) for s in shown.values()), reverse=True)


def planted(kind: str) -> set[str]:
    """The students of ``make_class`` given WRONG's mistake in ``kind`` (a file name)."""
    names = list(WRONG)
    return {f"student-{i:03d}@example.edu" for i in range(SIZE)
            if 13 <= i % 20 < 17 and names[i % len(names)] == kind}


def test_top_misconceptions_are_the_planted_ones(graded):
    summary = graded["summary"]
    expected = {PLANTED[kind]: planted(kind) for kind in PLANTED}
    top = list(summary["misconceptions"])[: len(expected)]
    assert {m: set(summary["misconceptions"][m]["students"]) for m in top} == expected
    assert summary["misconceptions"]["softmax-overflow"]["hint"].startswith("subtract each")
    # The planted mistakes without an id show as failing checks: failed by every student
    # given that mistake, and by no one else but the hostile submissions.
    hostile = {s for s in graded["kind_of"] if int(s[8:11]) % 20 >= 17}
    for kind in set(WRONG) - set(PLANTED):
        failed = {s for c in summary["checks"].values()
                  if c["exercise"] == kind.removesuffix(".py") for s in c["failed_students"]}
        assert planted(kind) <= failed <= planted(kind) | hostile
    correct = {s for s in graded["kind_of"] if int(s[8:11]) % 20 < 13}
    assert not correct & {s for c in summary["checks"].values() for s in c["failed_students"]}
    worst = [name for name, _ in class_report.lowest_checks(summary)]
    assert {name.split(":")[0] for name in worst} >= {"attention", "heads"}


def test_report_from_json_dir_is_byte_identical_to_the_batch_report(graded):
    out = graded["out"]
    for attempt in ("again", "once more"):
        target = graded["root"] / attempt
        run = grader("report", out / "json", "--csv", out / "grades.csv", "--out", target,
                     "--roster", graded["root"] / "roster.csv",
                     "--submissions", graded["root"] / "distinct")
        assert run.returncode == 0, run.stderr
        for name in FILES:
            assert (target / name).read_bytes() == (out / "report" / name).read_bytes(), name


def test_roster_columns_points_possible_and_exports_list_every_student(graded):
    out, stderr = graded["out"], graded["stderr"]
    reps = sorted({*graded["kind_of"].values()})
    with open(out / "grades.csv", newline="") as handle:
        grades = list(csv.reader(handle))
    assert grades[0][:6] == ["student", "id", "name", "email", "section", "softmax"]
    assert grades[1] == ["Points Possible", "", "", "", "", *exports.points_possible(COURSE)]
    assert grades[1][5:12] == ["15", "15", "20", "10", "25", "15", "100"]
    by_folder = {}
    for line in grades[2:]:
        by_folder.setdefault(line[0], []).append(line)
    assert set(by_folder) == {*reps, HOSTILE_NAME, "gone@example.edu"}
    assert len(by_folder[reps[1]]) == 2  # listed twice in the roster: both lines kept
    assert by_folder[reps[0]][0][1:4] == ["", "", ""]  # not in the roster: no id
    assert by_folder["gone@example.edu"][0][1] == "6002"
    assert by_folder["gone@example.edu"][0][grades[0].index("status")] == "no submission"
    assert "roster: 2 submission folders not in the roster" in stderr  # reps[0], the file
    assert "gone@example.edu (Never Submitted)" in stderr
    assert f"the roster lists folder {reps[1]} 2 times" in stderr
    summary = json.loads((out / "report" / "summary.json").read_text())
    assert summary["roster"]["not_in_roster"] == sorted([reps[0], HOSTILE_NAME])
    assert summary["roster"]["duplicate_folders"] == {reps[1]: ["5000", "6001"]}

    with open(out / "canvas.csv", newline="") as handle:
        canvas = list(csv.reader(handle))
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "attention"]
    assert canvas[1] == ["    Points Possible", "", "", "", "", "100"]
    assert len(canvas) - 2 == len(grades) - 2  # one line per student line, none dropped
    lines = {line[1]: line for line in canvas[2:]}
    total = grades[0].index("total")
    assert lines["5000"][5] == by_folder[reps[1]][0][total] != ""
    assert lines["6002"] == ["Never Submitted", "6002", "", "", "B", ""]
    with open(out / "gradescope.csv", newline="") as handle:
        gradescope = list(csv.DictReader(handle))
    assert list(gradescope[0]) == ["Name", "SID", "Email", "Total Score", "Max Points",
                                   "Status"]
    assert len(gradescope) == len(grades) - 2
    statuses = {g["Email"]: g["Status"] for g in gradescope}
    assert statuses["gone@example.edu"] == "Missing" and statuses[reps[2]] == "Graded"
    assert {g["Max Points"] for g in gradescope} == {"100"}


def test_a_bad_roster_is_refused_before_grading(tmp_path):
    (tmp_path / "roster.csv").write_text("folder,name\nada,Ada\n")
    run = grader("batch", tmp_path / "no-such-class", "--csv", tmp_path / "g.csv",
                 "--roster", tmp_path / "roster.csv")
    assert run.returncode == 2 and "has no id, email column" in run.stderr
    run = grader("batch", tmp_path, "--csv", tmp_path / "g.csv", "--export", "moodle", "x.csv")
    assert run.returncode == 2 and "unknown export 'moodle'" in run.stderr
    assert not (tmp_path / "g.csv").exists()


CHECK_PLOTS = """(() => [...document.querySelectorAll('svg.plot')].map(svg => {
  const box = svg.getBoundingClientRect();
  let sized = 0, painted = 0;
  for (const bar of svg.querySelectorAll('rect.bar')) {
    const r = bar.getBoundingClientRect();
    if (r.width < 1 || r.height < 1) continue;
    sized++;
    if (document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2) === bar) painted++;
  }
  return {kind: svg.getAttribute('class').split(' ')[1], width: box.width,
          height: box.height, sized, painted};
}))()"""


@pytest.fixture(scope="module")
def browser():
    if find_chromium() is None and os.geteuid() != 0:
        pytest.skip("chromium is missing and only root can install it: apt-get install chromium")
    with Browser(ensure_chromium()) as opened:  # installs Debian's chromium when missing
        yield opened


def test_report_opens_in_chromium_without_errors_and_its_plots_render(graded, browser):
    for name, folder in (("class-report", graded["report200"]),
                         ("class-report-small", graded["out"] / "report")):
        page = browser.open((folder / "index.html").as_uri(), CHECK_PLOTS)
        save(page["screenshot"], SCREENSHOTS / f"{name}.png")
        assert page["errors"] == [], name
        kinds = [plot["kind"] for plot in page["value"]]
        assert kinds[:2] == ["statuses", "histogram"], name
        assert {"misconceptions", "checks"} <= set(kinds), name
        for plot in page["value"]:
            assert plot["width"] > 100 and plot["height"] > 20, (name, plot)
            assert plot["sized"] > 0 and plot["painted"] == plot["sized"], (name, plot)
    assert page["screenshot"].startswith(b"\x89PNG")
    # The hostile folder name is shown as text, not run as markup; nothing is fetched.
    html = (graded["out"] / "report" / "index.html").read_text()
    assert "&lt;img src=x onerror=" in html and "<img" not in html
    # the one kind of link: to the report's own side-by-side pages of similar files
    local = re.sub(r'<a href="similar/\d+\.html">', "<a>", html)
    assert not re.search(r"<script|<link|<[a-z][^>]*\b(src|href)=|url\(|@import", local)


def test_the_browser_check_catches_a_broken_page(tmp_path, browser):
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><img src="missing.png">'
                    '<script>console.error("boom"); undefined_function();</script>'
                    '<svg class="plot histogram" width="0" height="0">'
                    '<rect class="bar" x="0" y="0" width="10" height="10"/></svg>'
                    '<svg class="plot checks" width="100" height="100">'
                    '<rect class="bar" x="0" y="0" width="50" height="50"/>'
                    '<rect x="0" y="0" width="100" height="100" fill="white"/></svg>'
                    "</body></html>")
    opened = browser.open(page.as_uri(), CHECK_PLOTS)
    text = "\n".join(opened["errors"])
    assert "boom" in text and "undefined_function" in text and "missing.png" in text
    zero, covered = opened["value"]
    assert zero["width"] == 0  # a plot with no size is seen
    assert covered["sized"] == 1 and covered["painted"] == 0  # a hidden bar is seen


def test_status_keys_are_short_and_cover_new_statuses():
    key = class_report.status_key
    assert key("graded") == "graded"
    assert key("not graded: the grader ran past its time limit") == "timeout"
    assert key("not graded: the grader was killed by signal 9") == "crashed"
    assert key("not graded: grader error RuntimeError('x')") == "crashed"
    assert key("not graded: not a folder") == "not a folder"
    assert key("not graded: the submission holds more than 20 MiB") == "too large"
    assert key("not graded: something new") == "not graded"
    assert key("empty") == "empty" and key("timeout: 60 s per exercise") == "timeout"
    assert key("Crashed: signal 11") == "crashed"


def test_histogram_puts_full_marks_alone_and_counts_every_score():
    bins = class_report.histogram([0, 0.5, 7.25, 14.99, 15, 15], 15)
    assert [b["low"] for b in bins] == list(range(16))
    assert bins[-1] == {"low": 15, "high": 15, "count": 2}
    assert bins[0]["count"] == 2 and bins[7]["count"] == 1 and bins[14]["count"] == 1
    hundred = class_report.histogram([100, 99.5, 50, 0], 100)
    assert len(hundred) == 21 and hundred[-1]["count"] == 1 and hundred[19]["count"] == 1
    assert sum(b["count"] for b in class_report.histogram([3.0, 1e9, -1], 1234)) == 3


def test_unreadable_or_missing_records_become_not_graded_rows(graded, tmp_path):
    json_dir = tmp_path / "json"
    (json_dir / records.FOLDER).mkdir(parents=True)
    good = next(p for p in sorted((graded["out"] / "json" / records.FOLDER).glob("*.json"))
                if json.loads(p.read_text())["record"]["status"] == "graded")
    shutil.copyfile(good, json_dir / records.FOLDER / good.name)
    (json_dir / records.FOLDER / "broken.json").write_text("{")
    (tmp_path / "grades.csv").write_text("student,total,status\nghost,100,graded\n"
                                         "gone,,no submission\nlate,,empty\n")
    rows = class_report.load_rows(json_dir, tmp_path / "grades.csv")
    statuses = {row.student: row.status for row in rows}
    assert statuses[good.stem] == "graded"
    assert statuses["broken"].startswith("not graded: unreadable record broken.json")
    assert statuses["ghost"] == "not graded: no record of ghost in json"
    assert statuses["late"] == "empty" and "gone" not in statuses
    summary = class_report.summarize(rows, COURSE)
    assert summary["statuses"]["empty"] == {"count": 1, "students": ["late"]}
    assert summary["class"]["graded"] == 1 and summary["total"]["graded"] == 1
