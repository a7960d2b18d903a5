"""Bad input costs one exercise, never the rest: missing files, syntax errors, crashes, hangs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from submission_tools import KIT as ROOT
from submission_tools import SOLUTIONS, make_submission, rule_off

from grader.core import engine
from grader.integrations.outputs import report
from grader.sandbox.isolation import GiB, Limits

SOFTMAX = (SOLUTIONS / "softmax.py").read_text()


def broken(body: str) -> str:
    """softmax.py whose softmax runs ``body`` first."""
    return SOFTMAX.replace("    ### BEGIN SOLUTION\n", f"    ### BEGIN SOLUTION\n    {body}\n", 1)


def test_broken_files_cost_only_their_exercise(tmp_path, monkeypatch):
    rule_off(monkeypatch)  # what the rule refuses (os._exit, an unknown module) is tested here
    sub = make_submission(tmp_path / "jane.doe@uni-1", {
        "kv_cache.py": None,
        "heads.py": "def split_heads(x, n_head:\n    pass\n",
        "softmax_backward.py": "import not_a_module_anywhere\n",
        "softmax.py": broken("import os; os._exit(3)"),
        "__init__.py": "raise RuntimeError('a package __init__ is never run')\n",
    })
    result = engine.grade_submission(sub)
    ex = result.exercises
    assert ex["kv_cache"].score == 0 and "kv_cache.py was not found" in ex["kv_cache"].error
    assert ex["heads"].score == 0 and "SyntaxError" in ex["heads"].error
    assert "ModuleNotFoundError" in ex["softmax_backward"].error
    assert ex["softmax"].score == 0 and "exit code 3" in ex["softmax"].error
    for name in ("attention", "mha"):
        assert ex[name].score == ex[name].max_score, ex[name].checks
    assert result.score == 45
    text = report.render(result)
    assert "kv_cache.py was not found" in text and "SyntaxError" in text


@pytest.mark.parametrize(
    "body, reason",
    [
        ("import sys; sys.exit(0)", "sys.exit(0)"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "signal SIGSEGV"),
        ("raise MemoryError", "out of memory"),
        ("import numpy; numpy.ones((1 << 40,), dtype=numpy.uint8)", "out of memory"),
    ],
)
def test_fatal_behaviour_zeroes_the_exercise_with_a_reason(tmp_path, body, reason, monkeypatch):
    rule_off(monkeypatch)  # past the rule, which refuses their imports
    sub = make_submission(tmp_path / "s", {"softmax.py": broken(body)})
    result = engine.grade_submission(sub, exercises=["softmax"], include_hidden=False,
                                     limits=Limits(memory=1 * GiB))
    assert result.exercises["softmax"].score == 0
    assert reason in result.exercises["softmax"].error


def test_endless_output_is_cut_off_at_the_file_size_limit(tmp_path):
    sub = make_submission(tmp_path / "s", {"softmax.py": broken("while True: print('x' * 4096)")})
    result = engine.grade_submission(sub, exercises=["softmax"], include_hidden=False)
    softmax = result.exercises["softmax"]
    assert softmax.score == 0
    assert "File too large" in softmax.checks[0].feedback
    assert len(softmax.output) < 5000


def test_a_hang_is_stopped_at_the_time_limit(tmp_path):
    """The exercise's own limit, with no limit per call (tests/test_call_limit.py has those)."""
    sub = make_submission(tmp_path / "s", {"softmax.py": broken("while True: pass")})
    result = engine.grade_submission(sub, exercises=["softmax", "kv_cache"],
                                     limits=Limits(timeout=3, call=0))
    assert result.exercises["softmax"].score == 0
    assert "stopped after 3 s" in result.exercises["softmax"].error
    assert result.exercises["kv_cache"].score == 15


def test_a_hang_at_import_is_stopped_too(tmp_path):
    sub = make_submission(tmp_path / "s", {"heads.py": "while True:\n    pass\n"})
    result = engine.grade_submission(sub, exercises=["heads"], limits=Limits(timeout=2, call=0))
    assert "stopped after 2 s" in result.exercises["heads"].error


def test_an_exception_fails_checks_with_the_students_line(tmp_path):
    sub = make_submission(tmp_path / "s", {"softmax.py": broken("1 / 0")})
    result = engine.grade_submission(sub, exercises=["softmax"], include_hidden=False)
    softmax = result.exercises["softmax"]
    assert softmax.error is None and softmax.score == 0
    feedback = softmax.checks[0].feedback
    assert "ZeroDivisionError" in feedback and "softmax.py line" in feedback


def test_printed_output_is_captured_capped_and_kept_out_of_feedback(tmp_path):
    sub = make_submission(tmp_path / "s", {"kv_cache.py": (SOLUTIONS / "kv_cache.py").read_text()
                                           + "\nprint('Score: 100/100 ' * 1000)\n"})
    result = engine.grade_submission(sub, exercises=["kv_cache"])
    kv = result.exercises["kv_cache"]
    assert kv.score == 15
    assert kv.output.startswith("Score: 100/100") and "truncated" in kv.output
    assert len(kv.output) < 5000
    assert "Score: 100/100" not in report.render(result)
    assert "Score: 100/100" not in json.dumps(report.to_json(result))
    assert "Score: 100/100" in report.render(result, show_output=True)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def test_cli_exits_2_for_a_bad_path():
    done = cli("grade", "no/such/folder")
    assert done.returncode == 2
    assert "no/such/folder is not a folder" in done.stderr


def test_cli_writes_json_and_exits_0_whatever_the_score(tmp_path):
    out = tmp_path / "results.json"
    done = cli("grade", "exercises", "--json", str(out), "--exercise", "heads")
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert data["score"] == 0 and data["extra_data"]["exercises"]["heads"]["max_score"] == 10
    assert "not implemented yet" in done.stdout
