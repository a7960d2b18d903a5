"""The nbgrader assignment, built from solutions/ and autograded by real nbgrader.

The course (``nbgrader_tools.plain_course``, built once per session): ``nbgrader
generate_assignment``, three submissions (the answer key filled into the release, the release
untouched, two exercises wrong with their locked test cells edited), ``nbgrader autograde`` and
``nbgrader export``; the tests then read the CSV, the gradebook and the notebooks. The isolated
autograde has its own module, test_nbgrader_autograde.py.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from nbgrader_tools import MISTAKES, NO_KEY_ANSWERED, RELEASE, TAMPERED
from nbgrader_tools import cells as _cells
from nbgrader_tools import gradebook as _gradebook
from nbgrader_tools import read as _read
from nbgrader_tools import source as _source
from submission_tools import BONUS as BONUS_NAMES
from submission_tools import CORE as EXERCISE_NAMES
from submission_tools import EXERCISES as BY_NAME
from submission_tools import SOLUTIONS, checks_for

from grader.integrations.routes import kernel, notebook
from grader.integrations.routes.nbgrader_settings import STUDENT_CONFIG
from grader.integrations.routes.stubs import BEGIN, END


@pytest.fixture(scope="module")
def course(nbgrader_course: Path) -> Path:
    return nbgrader_course


def _csv_scores(course: Path, assignment: str = "attention") -> dict[str, float]:
    with open(course / "grades.csv") as handle:
        return {row["student_id"]: float(row["score"]) for row in csv.DictReader(handle)
                if row["assignment"] == assignment}


# -- the build ------------------------------------------------------------------------------------
def test_build_is_byte_deterministic(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    notebook.build(first)
    notebook.build(second)
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert sorted(str(f) for f in files) == sorted(notebook.render())
    for relative in files:  # the students' settings name each folder's own exchange
        if str(relative) != STUDENT_CONFIG:
            assert (first / relative).read_bytes() == (second / relative).read_bytes()
    assert notebook.build(first) == []  # nothing is stale after a build


@pytest.mark.parametrize("exchange", [None, "site-exchange"])
def test_the_students_settings_name_the_course_and_its_exchange(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exchange: str | None) -> None:
    """What a student's fetch_assignment and submit need, read as nbgrader reads a config file
    (without one, nbgrader warned "No nbgrader_config.py file found" on the student's side)."""
    from traitlets.config.loader import PyFileConfigLoader

    monkeypatch.chdir(tmp_path)
    course = tmp_path / "course"
    notebook.build(course, exchange=exchange)
    student = tmp_path / "student"  # another folder: the copy has no course folder beside it
    student.mkdir()
    (student / "nbgrader_config.py").write_bytes((course / STUDENT_CONFIG).read_bytes())
    mine = PyFileConfigLoader("nbgrader_config.py", str(student)).load_config()
    theirs = PyFileConfigLoader("nbgrader_config.py", str(course)).load_config()
    assert mine.CourseDirectory.course_id == theirs.CourseDirectory.course_id == "attention-kit"
    assert mine.Exchange.root == theirs.Exchange.root == str(
        tmp_path / (exchange or "course/exchange"))


def test_answer_cells_hold_each_solution_file_whole() -> None:
    cells = _cells(notebook.notebook(track="core"))
    for name in EXERCISE_NAMES:
        text = (SOLUTIONS / f"{name}.py").read_text()
        cell = _source(cells[name])
        assert cell.startswith(f"%%exercise {name}\n")
        assert cells[name]["metadata"]["nbgrader"]["solution"] is True
        _, body, imports = notebook.split_solution(text)
        assert body.rstrip("\n") == cell.split("\n", 1)[1]
        solution_lines = [s for s in text.splitlines() if BEGIN.match(s) or END.match(s)]
        assert solution_lines and all(line in cell.splitlines() for line in solution_lines)
        for line in imports:  # left out of the cell, put back in the saved file
            assert line not in cell and line in kernel.exercise_file(name, cell.split("\n", 1)[1])


def test_bonus_assignment_scores_the_key_in_full_apart_from_the_core(course: Path) -> None:
    bonus = _csv_scores(course, notebook.BONUS_ASSIGNMENT)
    total = float(sum(BY_NAME[n].points for n in BONUS_NAMES))
    assert bonus == {"key": total, "two_wrong": 0.0, "untouched": 0.0}  # the others sent none
    assert _csv_scores(course)["key"] == 100.0


def test_points_add_up_to_the_rubric() -> None:
    cells = _cells(notebook.notebook(track="core"))
    for name in EXERCISE_NAMES:
        points = sum(cells[g]["metadata"]["nbgrader"].get("points", 0)
                     for g in (f"{name}_tests", f"{name}_hidden_tests") if g in cells)
        assert points == BY_NAME[name].points
        hidden = cells.get(f"{name}_hidden_tests")
        assert (hidden is not None) == any(c.hidden for c in checks_for(name))
        if hidden is not None:
            assert "### BEGIN HIDDEN TESTS" in _source(hidden)
            assert "hidden=True" not in _source(cells[f"{name}_tests"])


def test_saved_file_keeps_the_cells_line_numbers() -> None:
    body = "import numpy as np\n\ndef causal_mask(t):\n    return softmax(np.ones(t))\n"
    saved = kernel.exercise_file("attention", body).splitlines()
    assert saved[0].startswith("from .softmax import softmax  #")
    assert saved[1:] == body.splitlines()  # cell line n (the magic is line 1) is file line n
    mine = "def softmax(x):\n    return x\n\ndef f():\n    return softmax(1)\n"
    assert kernel.exercise_file("attention", mine).splitlines()[0].startswith("#")


# -- the release ----------------------------------------------------------------------------------
def test_release_holds_no_solution_code_and_no_hidden_test(course: Path) -> None:
    release = (course / RELEASE).read_text()
    cells = _cells(json.loads(release))
    for name in EXERCISE_NAMES:
        inside, outside, answer = set(), set(), False
        for line in (SOLUTIONS / f"{name}.py").read_text().splitlines():
            if BEGIN.match(line) or END.match(line):
                answer = not answer
            elif line.strip():
                (inside if answer else outside).add(line.strip())
        answer_lines = {line.strip() for line in _source(cells[name]).splitlines()}
        assert not (inside - outside) & answer_lines, name
        assert "raise NotImplementedError()" in answer_lines
    assert "BEGIN HIDDEN TESTS" not in release and "hidden=True" not in release
    assert "BEGIN SOLUTION" not in release


def test_release_visible_tests_run_without_the_answer_key(course: Path) -> None:
    executed = _cells(_read(course.parent / "no-key/student.ipynb"))
    for cell in executed.values():
        assert not [o for o in cell.get("outputs", []) if o["output_type"] == "error"]
    for name in EXERCISE_NAMES:
        visible = executed[f"{name}_tests"]
        results = [o for o in visible["outputs"] if o["output_type"] == "execute_result"]
        assert results, name
        points = visible["metadata"]["nbgrader"]["points"] if name in NO_KEY_ANSWERED else 0
        assert "".join(results[0]["data"]["text/plain"]) == str(points), name


# -- autograding ----------------------------------------------------------------------------------
def test_answer_key_scores_100_and_untouched_release_0(course: Path) -> None:
    scores = _csv_scores(course)
    assert scores["key"] == 100.0
    assert scores["untouched"] == 0.0


def test_notebook_earns_what_the_same_files_earn(course: Path) -> None:
    by_files = _read(course.parent / "files.json")["extra_data"]["exercises"]
    cells = _gradebook(course, "two_wrong")
    by_notebook = {
        n: cells[f"{n}_tests"] + cells.get(f"{n}_hidden_tests", 0.0) for n in EXERCISE_NAMES
    }
    assert by_notebook == {n: float(by_files[n]["score"]) for n in EXERCISE_NAMES}
    for name, _, _ in MISTAKES:  # the mistakes cost points, and only their own exercise's
        assert 0 < by_files[name]["score"] < BY_NAME[name].points
    assert _csv_scores(course)["two_wrong"] == sum(by_notebook.values())


def test_editing_locked_test_cells_gains_nothing(course: Path) -> None:
    cells = _gradebook(course, "two_wrong")
    graded = _cells(_read(course / "autograded/two_wrong/attention/attention.ipynb"))
    for name in TAMPERED:
        assert cells[f"{name}_tests"] < graded[f"{name}_tests"]["metadata"]["nbgrader"]["points"]
        assert _source(graded[f"{name}_tests"]).rstrip().endswith(f'score("{name}")')


# -- the kernel side, in this process -----------------------------------------------------------
def test_answer_cell_that_never_ends_is_stopped_and_still_saved(monkeypatch) -> None:
    monkeypatch.setattr(kernel, "RUN_TIMEOUT", 0.2)
    cell = "def split_heads(x, n_head):\n    return x\n\nwhile True:\n    pass\n"
    with pytest.raises(TimeoutError):
        kernel.run_exercise_cell("heads", cell, {})
    saved = kernel._kernel().folder / "heads.py"
    assert saved.read_text() == kernel.exercise_file("heads", cell)


def test_hidden_score_refuses_to_run_without_the_answer_key(monkeypatch, tmp_path: Path) -> None:
    _, body, _ = notebook.split_solution((SOLUTIONS / "softmax.py").read_text())
    namespace: dict = {}
    kernel.run_exercise_cell("softmax", body, namespace)
    assert callable(namespace["softmax"])
    monkeypatch.setenv(kernel.KEY_ENV, str(tmp_path))
    assert kernel.score("softmax") == sum(c.points for c in checks_for("softmax", hidden=False))
    with pytest.raises(RuntimeError, match="answer key is not here"):
        kernel.score("softmax", hidden=True)


def test_answer_files_are_the_files_the_magic_saves(tmp_path: Path) -> None:
    path = tmp_path / "attention.ipynb"
    path.write_text(json.dumps(notebook.notebook(track="core")))
    written = notebook.answer_files(path, tmp_path / "files")
    assert sorted(p.name for p in written) == sorted(f"{n}.py" for n in EXERCISE_NAMES)
    for name in EXERCISE_NAMES:
        _, body, _ = notebook.split_solution((SOLUTIONS / f"{name}.py").read_text())
        saved = (tmp_path / "files" / f"{name}.py").read_text()
        assert saved == kernel.exercise_file(name, body.rstrip("\n"))
    assert saved.startswith("# kv_cache.py")
    assert (tmp_path / "files/attention.py").read_text().startswith("from .softmax import")
