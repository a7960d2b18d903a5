"""``python -m grader report`` and the class report's files say what they hold: a wrong guess
at ``--csv`` says what the option reads, ``summary.md`` lists the exercises that could not be
graded as ``index.html`` does, and a roster entry without a submission is one of the statuses.

On 4e1a685: ``report JSON_DIR --out r --csv grades.csv`` (an instructor expecting report to
write the CSV batch writes) printed ``error: [Errno 2] No such file or directory:
'grades.csv'``; ``summary.md`` had no section for the exercises not graded; a roster's student
who never submitted was in the roster's problems alone, not in ``statuses``.
"""

from __future__ import annotations

import json

from submission_tools import COURSE

from grader.core import records
from grader.core.results import CheckResult, ExerciseResult, StudentRecord, SubmissionResult
from grader.integrations.outputs import class_report, exports, report
from grader.integrations.routes.cli import main

SYNTAX = "softmax.py could not be imported: SyntaxError: invalid syntax (softmax.py, line 3)"


def graded(student: str, softmax: float, error: str | None = None) -> StudentRecord:
    """A student's record as batch holds it (softmax alone graded, by one check)."""
    check = CheckResult("softmax", "rows_sum_to_one", "Rows sum to one.", softmax, 15, False,
                        softmax == 15)
    result = SubmissionResult(student, {"softmax": ExerciseResult(
        "softmax", 15, checks=[check], error=error)}, True)
    return StudentRecord(student, "graded", result=result)


def json_dir(tmp_path):
    folder = tmp_path / "json"
    folder.mkdir()
    for record in (graded("ada", 15), graded("bo", 0, SYNTAX)):  # as batch --json-dir writes
        report.write_instructor_json(record, folder)
        records.write(folder, record)
    return folder


def test_a_csv_that_is_not_there_says_what_report_reads(tmp_path, capsys):
    code = main(["report", str(json_dir(tmp_path)), "--out", str(tmp_path / "out"),
                 "--csv", str(tmp_path / "grades.csv")])
    err = capsys.readouterr().err
    assert code == 2 and "Errno" not in err
    assert err == (f"error: --csv {tmp_path / 'grades.csv'}: report reads the CSV that batch "
                   "--csv wrote, to add its students without a JSON (report writes index.html, "
                   "summary.json and summary.md into --out, and no CSV); there is no such "
                   "file\n")
    assert not (tmp_path / "out").exists()


def test_a_csv_that_batch_did_not_write_is_refused_as_such(tmp_path, capsys):
    (tmp_path / "roster.csv").write_text("folder,id,name,email\nada,1,Ada,ada@uni.edu\n")
    code = main(["report", str(json_dir(tmp_path)), "--out", str(tmp_path / "out"),
                 "--csv", str(tmp_path / "roster.csv")])
    assert code == 2
    assert capsys.readouterr().err.endswith("; this one has no student and status columns\n")


def test_summary_md_lists_the_exercises_that_could_not_be_graded(tmp_path):
    rows = class_report.load_rows(json_dir(tmp_path))
    summary = class_report.summarize(rows, COURSE)
    text = class_report.markdown(summary)
    assert ("## Exercises that could not be graded\n\n| exercise | student | why |\n|---|---|---|\n"
            f"| softmax | bo | {SYNTAX} |") in text
    assert "Exercises that could not be graded" in class_report.render(summary)  # as the HTML


def test_a_roster_entry_without_a_submission_is_a_status(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("folder,id,name,email\nada,1,Ada,ada@uni.edu\nbo,2,Bo,bo@uni.edu\n"
                      "cy,3,Cy Never,cy@uni.edu\n")
    rows = class_report.load_rows(json_dir(tmp_path))
    class_report.finish(rows, COURSE, report_dir=str(tmp_path / "out"),
                        roster=exports.load_roster(roster))
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["statuses"]["no submission"] == {"count": 1, "students": ["cy (Cy Never)"]}
    assert summary["statuses"]["graded"]["count"] == 2
    assert "| no submission | 1 | cy (Cy Never) |" in (tmp_path / "out" / "summary.md").read_text()
    page = (tmp_path / "out" / "index.html").read_text()
    assert "<td>no submission</td>" in page and "no submission: 1 of 3" in page


def test_a_results_folder_without_records_is_refused_with_what_to_do(tmp_path, capsys):
    """A ``--json-dir`` written before the records were kept (its ``<student>.json`` alone):
    ``report`` says so, rather than read back what it once rendered."""
    folder = tmp_path / "json"
    folder.mkdir()
    report.write_instructor_json(graded("ada", 15), folder)
    assert main(["report", str(folder), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "keeps no records (.records/)" in err and "batch --json-dir" in err
    assert not (tmp_path / "out").exists()
