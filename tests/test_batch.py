"""Batch grading: one row per student, broken submissions included, identical on a rerun."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from submission_tools import BONUS, KIT, grader_command, make_submission

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


def test_batch_grades_every_student_and_reruns_identically(tmp_path):
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
    assert bonus["bob-stubs"] == ["0"] * (len(BONUS) + 1)  # the stubs: attempted, not done
    assert table["carol.syntax"] == ["0"] * 7 + ["graded"]
    assert bonus["carol.syntax"] == [""] * len(BONUS) + ["0"]  # no bonus files: not attempted
    assert table["dave_exits"] == ["0"] * 7 + ["graded"]
    assert table["eve-too-big"][:7] == [""] * 7 and "more than 20 MiB" in table["eve-too-big"][7]
    assert "frank.txt" not in table  # a stray file is not a student
    assert "warning: skipped frank.txt: not a folder" in first.stderr
    assert table["gina-empty"] == [""] * 7 + ["empty"]  # nothing was submitted
    assert bonus["gina-empty"] == [""] * (len(BONUS) + 1)
    json_files = sorted(p.name for p in (tmp_path / "first" / "json").iterdir())
    assert json_files == [f"{s}.json" for s in ("ada.lovelace@uni.edu", "bob-stubs",
                                                "carol.syntax", "dave_exits")]
    dave = json.loads((tmp_path / "first" / "json" / "dave_exits.json").read_text())
    assert "exit code 9" in dave["instructor"]["errors"]["softmax"]

    second = batch(root, tmp_path / "second")
    assert second.returncode == 0, second.stderr
    for name in ["grades.csv", *(f"json/{f}" for f in json_files)]:
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes()
