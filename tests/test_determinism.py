"""The same submission gets the same score and feedback every run."""

from __future__ import annotations

import json

from submission_tools import SOLUTIONS, make_submission

from grader.core import engine
from grader.integrations.outputs import report


def test_two_runs_give_identical_json(tmp_path):
    softmax = (SOLUTIONS / "softmax.py").read_text()
    no_shift = softmax.replace(
        "shifted = converted - np.max(converted, axis=axis, keepdims=True)", "shifted = converted"
    )
    attention = (SOLUTIONS / "attention.py").read_text().replace("np.sqrt(d_k)", "d_k")
    assert no_shift != softmax
    sub = make_submission(tmp_path / "s", {"softmax.py": no_shift, "attention.py": attention})
    runs = [
        json.dumps(report.to_json(engine.grade_submission(sub, exercises=["softmax", "attention"])),
                   sort_keys=True)
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    data = json.loads(runs[0])
    assert 0 < data["extra_data"]["exercises"]["softmax"]["score"] < 15
    assert 0 < data["extra_data"]["exercises"]["attention"]["score"] < 20


def test_what_the_code_printed_is_the_same_every_run(tmp_path):
    # A warning names the file that raised it, and each run grades a copy in a temporary
    # folder of its own: the instructor's output names the file as the student knows it.
    softmax = (SOLUTIONS / "softmax.py").read_text().replace(
        "shifted = converted - np.max(converted, axis=axis, keepdims=True)", "shifted = converted")
    sub = make_submission(tmp_path / "s", {"softmax.py": softmax})
    runs = [report.to_json(engine.grade_submission(sub, exercises=["softmax"]),
                           include_output=True) for _ in range(2)]
    assert runs[0] == runs[1]
    output = runs[0]["instructor"]["output"]["softmax"]
    assert "softmax.py:" in output and "RuntimeWarning" in output, output
    assert "attention-kit-" not in output and "/views/" not in output, output
