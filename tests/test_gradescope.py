"""The Gradescope bundle: run_autograder on a simulated /autograder tree writes valid JSON."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile

from submission_tools import KIT, SOLUTIONS

from grader.core.course import number
from grader.integrations.routes import gradescope, notebook

TEST_KEYS = {"name", "score", "max_score", "status", "output", "tags", "visibility"}


def test_run_autograder_writes_gradescope_results(tmp_path):
    bundle = gradescope.build(tmp_path / "autograder.zip")
    root = tmp_path / "autograder"
    with zipfile.ZipFile(bundle) as archive:
        names = archive.namelist()
        archive.extractall(root / "source")
        for info in archive.infolist():  # extractall drops the mode bits
            os.chmod(root / "source" / info.filename, info.external_attr >> 16 & 0o777)
    assert {"setup.sh", "run_autograder", "solutions/softmax.py", "course.toml",
            "grader/problems/softmax.py"} <= set(names)
    assert os.stat(root / "source" / "run_autograder").st_mode & stat.S_IXUSR
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    upload = root / "submission" / "exercises"  # a student who uploaded the whole folder
    shutil.copytree(KIT / "exercises", upload)
    shutil.copyfile(SOLUTIONS / "kv_cache.py", upload / "kv_cache.py")
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    run = subprocess.run([str(root / "run_autograder")], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 15
    assert results["stdout_visibility"] == "hidden"
    assert results["extra_data"]["answer_key_present"] is True
    assert results["tests"] and all(set(t) == TEST_KEYS for t in results["tests"])
    visibility = {t["name"]: t["visibility"] for t in results["tests"]}
    assert visibility["kv_cache: test_kv_cache_matches_answer_key"] == "after_published"
    assert set(visibility.values()) == {"visible", "after_published"}
    core = [t for t in results["tests"] if "bonus" not in t["tags"]]
    assert sum(t["max_score"] for t in core) == 100
    assert sum(t["score"] for t in core) == 15
    # The line every student sees counts the visible checks only: Gradescope hides the total
    # while the after_published tests are hidden, and this line must not give it away.
    shown = [t for t in core if t["visibility"] == "visible"]
    later = [t for t in core if t["visibility"] == "after_published"]
    assert sum(t["score"] for t in shown) < results["score"]  # kv_cache's hidden point
    assert results["output"] == (
        f"Visible checks: {number(sum(t['score'] for t in shown))} / "
        f"{number(sum(t['max_score'] for t in shown))} points. "
        f"{number(sum(t['max_score'] for t in later))} more points come from checks shown when "
        "grades are published.")
    # the bonus stubs, untouched: not attempted, so no failing test (tests/test_not_attempted.py)
    assert not [t for t in results["tests"] if "bonus" in t["tags"]]
    assert not any(e["attempted"] for e in results["extra_data"]["bonus"].values())


def test_empty_submission_still_gets_results(tmp_path):
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    assert gradescope.run_and_write(root) == 0
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 0 and "No exercise files found" in results["output"]


def _autograder_root(tmp_path, name):
    root = tmp_path / name
    (root / "submission").mkdir(parents=True)
    shutil.copytree(SOLUTIONS, root / "source" / "solutions")
    return root


def test_uploaded_notebook_scores_what_the_same_code_as_files_scores(tmp_path):
    wrong = (SOLUTIONS / "softmax.py").read_text().replace(
        "shifted = converted - np.max(converted, axis=axis, keepdims=True)", "shifted = converted")
    answered = {"softmax": wrong, "kv_cache": (SOLUTIONS / "kv_cache.py").read_text()}
    as_files = _autograder_root(tmp_path, "files")
    for name, text in answered.items():
        (as_files / "submission" / f"{name}.py").write_text(text)
    as_notebook = _autograder_root(tmp_path, "notebook")
    nb = notebook.notebook(track="core")
    answer_ids = {c["metadata"]["nbgrader"]["grade_id"] for c in nb["cells"]
                  if c["metadata"]["nbgrader"]["solution"]}
    nb["cells"] = [c for c in nb["cells"]  # the other answer cells deleted
                   if c["metadata"]["nbgrader"]["grade_id"] not in answer_ids - set(answered)]
    for cell in nb["cells"]:
        name = cell["metadata"]["nbgrader"]["grade_id"]
        if name in answered:
            cell["source"] = f"%%exercise {name}\n" + notebook.split_solution(answered[name])[1]
    (as_notebook / "submission" / "attention.ipynb").write_text(json.dumps(nb))
    by_files, by_notebook = gradescope.run(as_files), gradescope.run(as_notebook)
    assert 0 < by_files["score"] < 30
    assert by_notebook["score"] == by_files["score"]
    assert by_notebook["tests"] == by_files["tests"]
    assert "Graded the answer cells of attention.ipynb." in by_notebook["output"]


def test_unreadable_notebook_upload_says_why(tmp_path):
    root = _autograder_root(tmp_path, "autograder")
    (root / "submission" / "attention.ipynb").write_text("{not json")
    results = gradescope.run(root)
    assert results["score"] == 0
    assert "attention.ipynb is not a notebook (invalid JSON)" in results["output"]
