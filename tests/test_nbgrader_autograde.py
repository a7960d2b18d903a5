"""``python -m grader nbgrader autograde``: nbgrader's autograde step without running notebooks.

The course (``nbgrader_tools.isolated_course``, built once per session) gets the same key and
two-wrong notebooks as the plain nbgrader course, a hostile notebook (forged ``score()``, and
attempts on the gradebook, the answer key and its own feedback folder), a notebook with one
answer cell deleted and one duplicated, a folder without a notebook and a file that is not
JSON; then the isolated autograde, ``nbgrader export`` and ``nbgrader generate_feedback``.
"""

from __future__ import annotations

import csv
import ctypes
import html
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import nbgrader_tools as tools
import pytest
from submission_tools import CORE, COURSE

from grader.integrations.routes import hide, kernel, notebook
from grader.integrations.routes.nbgrader_gradebook import Submission, cell_outputs

GRADED = ("key", "two_wrong", "hostile", "mangled", "bare", "attacker", "surrogate")


@pytest.fixture(scope="module")
def isolated(isolated_course: tuple[Path, str]) -> Path:
    return isolated_course[0]


def _scores(course: Path) -> dict[str, float]:
    with open(course / "grades.csv") as handle:
        return {row["student_id"]: float(row["score"]) for row in csv.DictReader(handle)
                if row["assignment"] == "attention"}


def _statuses(printed: str) -> dict[str, str]:
    rows = re.findall(r"^(\S+)\s+[\d.]+ / [\d.]+\s+(.+)$", printed, re.MULTILINE)
    return dict(rows)


def _test_cell_text(course: Path, student: str) -> dict[str, str]:
    nb = tools.read(course / "autograded" / student / "attention" / "attention.ipynb")
    return {grade_id: "".join("".join(o.get("text", "")) for o in cell["outputs"])
            for grade_id, cell in tools.cells(nb).items() if grade_id.endswith("_tests")}


# -- scores ---------------------------------------------------------------------------------------
def test_key_scores_100_wrong_its_file_score_hostile_its_honest_score(
        isolated: Path, nbgrader_course: Path) -> None:
    scores = _scores(isolated)
    by_files = tools.read(nbgrader_course.parent / "files.json")["score"]
    assert scores["key"] == 100.0
    assert scores["two_wrong"] == by_files < 100
    # The hostile softmax cell is the key under the attacks; everything else earns nothing.
    assert scores["hostile"] == COURSE.points("softmax")
    # The mangled notebook: softmax's cell deleted (0), kv_cache's answered last (its points).
    assert scores["mangled"] == COURSE.points("kv_cache")
    # Only kv_cache's answer cell, in JSON nbformat cannot read: graded all the same.
    assert scores["bare"] == COURSE.points("kv_cache")
    assert scores["missing"] == scores["not_json"] == 0.0


def test_grades_match_plain_nbgrader_autograde_cell_by_cell(
        isolated: Path, nbgrader_course: Path) -> None:
    for student in ("key", "two_wrong"):
        assert tools.gradebook(isolated, student) == tools.gradebook(nbgrader_course, student)


def test_test_cells_print_what_the_kernel_printed(isolated: Path, nbgrader_course: Path) -> None:
    for student in ("key", "two_wrong"):
        mine, plain = (_test_cell_text(isolated, student),
                       _test_cell_text(nbgrader_course, student))
        assert mine == plain
        assert all(text.strip() for text in mine.values())


def test_every_student_gets_a_status(isolated_course: tuple[Path, str]) -> None:
    statuses = _statuses(isolated_course[1])
    assert statuses["key"] == "graded"
    assert statuses["two_wrong"] == "late by 2 h 30 min"
    assert statuses["hostile"] == "graded"
    assert statuses["mangled"] == ("answer cell deleted: softmax; duplicated answer cell: "
                                   "kv_cache (the last one graded)")
    assert statuses["bare"].startswith("answer cell deleted: softmax, softmax_backward, ")
    assert statuses["bare"].endswith("; test cells deleted: softmax_tests, softmax_hidden_tests "
                                     "and 10 more: its answer cells are shown in a copy of the "
                                     "release")
    assert statuses["missing"] == "missing notebook"
    assert statuses["not_json"] == "not a notebook (invalid JSON)"
    assert "bystander" not in statuses
    assert statuses["surrogate"] == "graded"
    assert "7 of 9 notebooks graded" in isolated_course[1]


def test_a_lone_surrogate_costs_its_exercise_alone(isolated: Path) -> None:
    """Issue 19, case 1: a lone surrogate in one answer cell once stopped the whole class's
    autograde (a traceback, nobody recorded). Now it costs the cell's exercise."""
    cells, key = tools.gradebook(isolated, "surrogate"), tools.gradebook(isolated, "key")
    kv_cache = {"kv_cache_tests", "kv_cache_hidden_tests"}
    assert {name: cells[name] for name in kv_cache} == dict.fromkeys(kv_cache, 0)
    assert {n: s for n, s in cells.items() if n not in kv_cache} == {
        n: s for n, s in key.items() if n not in kv_cache}  # a comment's costs nothing
    assert "could not be imported" in _test_cell_text(isolated, "surrogate")["kv_cache_tests"]


def test_deleted_answer_cell_scores_zero_and_says_why(isolated: Path) -> None:
    texts = _test_cell_text(isolated, "mangled")
    assert "its answer cell is not in the submitted notebook" in texts["softmax_tests"]
    grades = tools.gradebook(isolated, "mangled")
    assert grades["softmax_tests"] == grades["softmax_hidden_tests"] == 0


# -- the hostile notebook -------------------------------------------------------------------------
def test_hostile_notebook_reached_neither_gradebook_nor_answer_key(isolated: Path) -> None:
    assert tools.structure(isolated) == json.loads(
        (isolated.parent / "structure.json").read_text())
    bystander = tools.gradebook(isolated, "bystander")
    assert bystander["softmax_tests"] == 7
    heads = _test_cell_text(isolated, "hostile")["heads_tests"]
    # It ran, and what it found is what the feedback shows: refusals, no key.
    assert "refused: " in heads and "def softmax" not in heads


def test_no_feedback_file_holds_answer_key_text_the_student_did_not_submit(
        isolated: Path) -> None:
    lines = tools.key_lines()
    feedback = sorted((isolated / "feedback").rglob("*"))
    assert {p.parent.parent.name for p in feedback if p.suffix == ".html"} == set(GRADED)
    for path in feedback:
        if path.is_dir():
            continue
        assert path.name in ("attention.html", "timestamp.txt"), path
        student = path.relative_to(isolated / "feedback").parts[0]
        submitted = (isolated / "submitted" / student / "attention" / "attention.ipynb"
                     ).read_text()
        text = path.read_text()
        leaked = [line for line in lines if line not in submitted
                  and (line in text or html.escape(line) in text)]
        assert not leaked, (path, leaked[:3])


def test_attacks_score_nothing_and_leak_no_hidden_input(isolated: Path) -> None:
    # Past the rule: the softmax exits the hidden check's own worker with its inputs, the mha
    # calls torch's attention under DisableTorchFunction (tests/attacks, test_out_of_reach).
    # The softmax is an honest one in the visible checks' worker, graded before: those points
    # stand, whatever the hidden worker did.
    grades = tools.gradebook(isolated, "attacker")
    assert grades["softmax_tests"] > 0
    assert _scores(isolated)["attacker"] == grades["softmax_tests"]
    assert all(points == 0 for cell, points in grades.items()
               if cell.startswith(("softmax_hidden", "mha"))), grades
    printed = "".join(_test_cell_text(isolated, "attacker").values())
    leaked = re.compile(r"LEAK[a-z]\d")  # the inputs as the softmax writes them down
    assert not leaked.search(printed)
    assert "the worker stopped during a hidden check" in printed
    assert "torch's own attention" in printed
    feedback = isolated / "feedback" / "attacker" / "attention" / "attention.html"
    assert not leaked.search(feedback.read_text())  # it shows the cells' code, not the inputs


def test_hostile_scores_in_plain_cells_not_forged(isolated: Path) -> None:
    grades = tools.gradebook(isolated, "hostile")
    assert grades["heads_tests"] == 0 and grades["mha_tests"] == 0
    nb = tools.read(isolated / "autograded/hostile/attention/attention.ipynb")
    for grade_id, cell in tools.cells(nb).items():
        if grade_id.endswith("_tests"):  # the locked cells as generated, not the edited ones
            assert "score(" in tools.source(cell) and "lambda" not in tools.source(cell)
        if grade_id in CORE:
            assert cell["outputs"] == []  # nothing the student's run printed survives


# -- the course folder stays clean ----------------------------------------------------------------
def test_no_cache_lands_in_either_course_folder(isolated: Path, nbgrader_course: Path) -> None:
    for course in (isolated, nbgrader_course):
        found = [p for p in course.rglob("*")
                 if p.name in (".hypothesis", "__pycache__", ".ipynb_checkpoints")]
        assert not found


def test_answers_are_read_by_grade_id_the_last_duplicate_counting() -> None:
    nb = notebook.notebook(track="core")
    first = json.loads(json.dumps(next(c for c in nb["cells"]
                                       if c["metadata"]["nbgrader"]["grade_id"] == "heads")))
    first["source"] = "%%exercise heads\nFIRST = 1\n"
    nb["cells"].insert(0, first)
    found = notebook.answers(nb)
    assert found.duplicated == ["heads"]
    assert "FIRST" not in found.files["heads"] and "def split_heads" in found.files["heads"]
    assert sorted(found.files) == sorted(CORE)


@pytest.mark.parametrize("text, reason", [
    ("{not json", "invalid JSON"),
    ('["a list"]', "JSON without a list of cells"),
    ("\xff\xfe", "invalid JSON"),
])
def test_files_that_are_not_notebooks_say_why(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "attention.ipynb"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(notebook.NotANotebook, match=re.escape(reason)):
        notebook.read_notebook(path)


# -- hiding the course folder, and the kernel's caches --------------------------------------------
def _in_child(action) -> str:
    """``action()`` in a forked child; what it returned (a string)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            out = action()
        except BaseException as error:
            out = f"error {error!r}"
        os.write(write, out.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as handle:
        out = handle.read()
    os.waitpid(pid, 0)
    return out


@pytest.mark.parametrize("user", ["root", "unprivileged"])
def test_hidden_folder_is_empty_for_the_child_alone(user: str) -> None:
    if user == "root" and os.geteuid() != 0:
        pytest.skip("needs root")
    base = Path(tempfile.mkdtemp(prefix="attention-kit-hide-"))
    try:
        os.chmod(base, 0o755)
        folder = base / "course"
        folder.mkdir()
        (folder / "gradebook.db").write_text("grades")

        def look() -> str:
            if user == "unprivileged" and os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
                ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # dumpable again, as a user's process is
            how = hide.hide([folder])
            try:
                (folder / "planted").write_text("x")
                wrote = "wrote"
            except OSError as error:
                wrote = type(error).__name__
            return json.dumps([how, os.listdir(folder), wrote])

        how, seen, wrote = json.loads(_in_child(look))
        if not how:
            pytest.skip("no mount namespace allowed here for this user")
        assert how == "mount namespace" and seen == [] and wrote == "OSError"
        assert os.listdir(folder) == ["gradebook.db"]  # everyone else still sees the course
    finally:
        shutil.rmtree(base)


def test_closed_folders_get_their_mode_back(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)
    with hide.closed([tmp_path]):
        assert stat.S_IMODE(os.stat(tmp_path).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path).st_mode) == 0o755


def test_kernel_keeps_hypothesis_storage_and_bytecode_out_of_the_notebook_folder(
        tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "InteractiveShell.instance().run_line_magic("
        "'load_ext', 'grader.integrations.routes.kernel')\n"
        "from hypothesis.configuration import storage_directory\n"
        "print(storage_directory('examples').path, sys.dont_write_bytecode)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != kernel.HYPOTHESIS_STORAGE_ENV}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    path, no_bytecode = done.stdout.split()
    assert not Path(path).is_relative_to(tmp_path) and no_bytecode == "True"


def test_a_student_the_grader_failed_on_earns_nothing_from_the_test_cells() -> None:
    from nbformat import from_dict
    from nbgrader.utils import determine_grade

    sub = Submission("someone", Path("."), status="not graded: the grader ran past its limit")
    cell = from_dict({"cell_type": "code", "source": 'score("softmax")', "execution_count": None,
                      "metadata": {"nbgrader": {"grade": True, "grade_id": "softmax_tests",
                                                "points": 14, "solution": False}},
                      "outputs": cell_outputs(sub, "softmax", hidden=False)})
    assert determine_grade(cell) == (0, 14)


def test_test_cells_worth_other_points_than_the_rubric_stop_the_command(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from grader.core.course import load
    from grader.integrations.routes.nbgrader_gradebook import (
        AutogradeError,
        check_course,
        read_layout,
    )

    rubric = tmp_path / "course.toml"
    rubric.write_text("[exercises.softmax]\npoints = 30\n")
    setup = SimpleNamespace(name="setup", source=f"%load_ext x\n%env ATTENTION_KIT_COURSE={rubric}")
    cells = [SimpleNamespace(name=n, max_score=p) for n, p in
             (("softmax_tests", 14.0), ("softmax_hidden_tests", 1.0))]
    nb = SimpleNamespace(name="attention", grade_cells=cells, source_cells=[setup],
                         solution_cells=[SimpleNamespace(name="softmax")])
    gradebook = SimpleNamespace(find_assignment=lambda name: SimpleNamespace(notebooks=[nb]))
    layout = read_layout(gradebook, "attention")
    assert layout.course_file == rubric  # the course the notebook was built with
    assert layout.tests["softmax_hidden_tests"] == ("softmax", True, 1.0)
    check_course(layout, COURSE)  # the kit's rubric: 14 + 1
    with pytest.raises(AutogradeError, match="worth 14 points in the gradebook and 28"):
        check_course(layout, load(rubric))


def test_rows_are_recorded_as_they_come_and_a_failed_grader_says_how_many_were_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.core.results import StudentRecord, SubmissionResult
    from grader.integrations.routes import batch, nbgrader_autograde
    from grader.integrations.routes.nbgrader_gradebook import AutogradeError

    graded = SubmissionResult("aaa", {}, True)

    def first_then_fail(root, *, on_record, **options):  # runs in the forked grading process
        on_record(StudentRecord("aaa", "graded", result=graded))
        raise RuntimeError("the kit broke on the second student")

    monkeypatch.setattr(batch, "run", first_then_fail)
    found = notebook.Answers(files={"softmax": "pass\n"}, duplicated=[], sources={})
    subs = [Submission(name, tmp_path, found=found) for name in ("aaa", "bbb")]
    taken = []
    with pytest.raises(AutogradeError, match="1 of 2 notebooks was not recorded"):
        nbgrader_autograde.grade(subs, [tmp_path / "course"], jobs=1, course=COURSE,
                                 key_folder=tmp_path / "key", limits=None, progress=None,
                                 on_graded=taken.append)
    assert [(s.student, s.result) for s in taken] == [("aaa", graded)]
