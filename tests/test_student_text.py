"""Student text, wherever it lands, holds no bidirectional control and makes no link.

The message every test here carries: the bidirectional override, embedding, isolates and marks
(U+202E, U+202C, U+2066, U+2069, U+200E, U+200F, U+061C: invisible, they make a line read in
another order) and a bare URL and ``www.`` name (GitHub-flavoured Markdown makes links of
them). On 4e1a685 every control reached the terminal report, summary.md, index.html, the CSVs,
Gradescope's results and nbgrader's cell outputs as it was, and summary.md linked both
addresses. Each test quotes what the reader now sees.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from submission_tools import SOLUTIONS, make_submission

from grader.core import engine
from grader.core.results import StudentRecord
from grader.integrations.outputs import class_page, class_report, exports, report

MESSAGE = ("\u202eevil\u202c \u2066x\u2069 \u200e\u200f\u061c see https://evil.example/x or "
           "www.evil.example")
SHOWN = "?evil? ?x? ??? see https://evil.example/x or www.evil.example"  # in plain text
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def no_bidi(text: str) -> bool:
    return not set(text) & set(BIDI)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """softmax and heads alone."""
    path = tmp_path_factory.mktemp("course") / "course.toml"
    path.write_text("".join(f"[exercises.{name}]\nenabled = "
                            f"{str(name in ('softmax', 'heads')).lower()}\n"
                            for name in engine.load().names()))
    return engine.load(path)


@pytest.fixture(scope="module")
def graded(tmp_path_factory, course):
    """softmax.py raises the message at import (its line, as the student wrote it, holds the
    controls themselves); heads.py is the key's and prints it."""
    folder = make_submission(tmp_path_factory.mktemp("text") / "mallory", {
        "softmax.py": f"raise ValueError('{MESSAGE}')\n",
        "heads.py": (SOLUTIONS / "heads.py").read_text() + f"\nprint('{MESSAGE}')\n"},
        base=None)
    return engine.grade_submission(folder, course=course)


def test_the_terminal_report_shows_each_control_as_a_question_mark(graded):
    shown = report.render(graded, show_output=True)
    assert no_bidi(shown)
    assert (f"Not graded: softmax.py could not be imported: ValueError: {SHOWN} (at softmax.py "
            f"line 1, in <module>: raise ValueError('{SHOWN}'))") in shown.splitlines()
    assert f"  | {SHOWN}" in shown.splitlines()  # what heads printed
    assert no_bidi(report.summary(graded))


def test_gradescope_and_the_batch_json_hold_no_control(graded, tmp_path):
    data = report.to_json(graded, include_output=True)
    assert no_bidi(json.dumps(data, ensure_ascii=False))
    softmax = next(t for t in data["tests"] if t["tags"] == ["softmax"])
    assert softmax["output"].endswith(f"raise ValueError('{SHOWN}'))")
    assert data["instructor"]["output"]["heads"].startswith(f"{SHOWN}\n")


def test_gradescope_names_an_uploaded_notebook_without_its_controls(tmp_path):
    from grader.integrations.routes import gradescope, notebook

    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "source" / "course.toml").write_text(
        "".join(f"[exercises.{name}]\nenabled = {str(name == 'softmax').lower()}\n"
                for name in engine.load().names()))
    (root / "submission").mkdir()
    name = "\u202eevil\u202c www.evil.example.ipynb"
    (root / "submission" / name).write_text(json.dumps(notebook.notebook(track="core")))
    data = gradescope.run(root)
    assert no_bidi(json.dumps(data, ensure_ascii=False))
    assert data["output"].endswith("Graded the answer cells of ?evil? www.evil.example.ipynb.")


def class_rows(graded) -> list[StudentRecord]:
    """mallory graded (her softmax's error in her results), oscar not graded with the message
    as his status, and a roster entry named with it."""
    return [StudentRecord("mallory", "graded", result=graded),
            StudentRecord("oscar", f"not graded: {MESSAGE}")]


def test_summary_md_escapes_the_controls_and_links_nothing(graded, course, tmp_path):
    rows = class_rows(graded)
    class_report.build(rows, course, tmp_path / "report")
    text = (tmp_path / "report" / "summary.md").read_text()
    assert no_bidi(text)
    # GitHub renders this cell as: not graded: ?evil? ?x? ??? see https://evil.example/x or
    # www.evil.example, as text (cmark-gfm makes no link of "https\://" or "www\.")
    assert ("| oscar | not graded: ?evil? ?x? ??? see https\\://evil.example/x or "
            "www\\.evil.example |") in text.splitlines()
    assert "https://" not in text and "www.evil" not in text


def test_index_html_escapes_the_controls(graded, course):
    rows = class_rows(graded)
    summary = class_report.summarize(rows, course)
    page = class_page.render(summary)
    assert no_bidi(page)
    assert f'<td class="who">oscar</td><td>not graded: {SHOWN}</td>' in page
    assert "evil.example/x\"" not in page and "<a href=\"https://evil" not in page
    assert f"<td>softmax.py could not be imported: ValueError: {SHOWN} (at " in page


def test_the_similarity_page_shows_code_without_its_controls(tmp_path, course):
    from grader.integrations.outputs import similarity

    code = (SOLUTIONS / "softmax.py").read_text() + f"\nNOTE = '{MESSAGE}'\n"
    for who, comment in (("\u202eevil", "# mine\n"), ("alice", "")):  # a copy: flagged, a page
        (tmp_path / who).mkdir()
        (tmp_path / who / "softmax.py").write_text(comment + code)
    found = similarity.compare({p.name: p for p in tmp_path.iterdir()}, course)
    pages = [found.pages[pair["page"]] for pair in found.pairs if pair["exercise"] == "softmax"]
    assert pages
    for page in pages:
        assert no_bidi(page)
        assert f"NOTE = &#x27;{SHOWN}&#x27;" in page or f"NOTE = &#39;{SHOWN}&#39;" in page
        assert "<h2>?evil</h2>" in page


def test_every_csv_shows_the_controls_as_question_marks(graded, course, tmp_path):
    rows = class_rows(graded)
    exports.write_grades(rows, tmp_path / "grades.csv", course)
    roster = exports.Roster(list(exports.ROSTER_COLUMNS), [
        {"folder": "oscar", "id": "1", "name": MESSAGE, "email": "o@uni.edu"}])
    found = exports.match(roster, rows)
    for kind in exports.EXPORTS:
        exports.write_export(kind, found, tmp_path / f"{kind}.csv", course, "attention")
    exports.write_csv(found, tmp_path / "roster.csv", course)
    for path in tmp_path.glob("*.csv"):
        assert no_bidi(path.read_text()), path.name
    with open(tmp_path / "grades.csv", newline="") as handle:
        status = {line[0]: line[columns_index(course)] for line in csv.reader(handle)}
    assert status["oscar"] == f"not graded: {SHOWN}"
    with open(tmp_path / "canvas.csv", newline="") as handle:
        assert [line[0] for line in csv.reader(handle) if line[1] == "1"] == [SHOWN]


def columns_index(course) -> int:
    return exports.columns(course).index("status")


def test_nbgrader_cell_outputs_and_summary_hold_no_control(graded):
    from grader.integrations.routes.nbgrader_autograde import summary
    from grader.integrations.routes.nbgrader_gradebook import Submission, cell_outputs

    sub = Submission("mallory", Path("."), result=graded)
    text = cell_outputs(sub, "softmax", hidden=False)[0]["text"]
    assert no_bidi(text)
    assert (f"Not graded: softmax.py could not be imported: ValueError: {SHOWN} (at "
            "softmax.py line 1") in text
    failed = Submission("oscar", Path("."), status=f"not graded: {MESSAGE}")
    error = cell_outputs(failed, "softmax", hidden=False)[0]
    assert error["evalue"] == f"not graded: {SHOWN}" and no_bidi(str(error))
    assert no_bidi(summary([sub, failed]))
    assert f"not graded: {SHOWN}" in summary([failed])
