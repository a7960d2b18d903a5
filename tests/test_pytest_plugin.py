"""The checks as pytest tests (``grader/integrations/routes/pytest_plugin.py``): each item's
verdict is ``grade``'s for its check, on every zoo entry; and real ``pytest`` runs, in a handout
and in the kit, collect ``exercises/<exercise>.py::<check>`` items with their markers, stop at
``-x``, rerun with ``--lf``, xfail a stub and end with ``grade``'s table, while the kit's own
tests collect as they do without the plugin.

The zoo is graded once per session (``zoo_results`` in conftest.py, shared with test_zoo.py);
the ``pytest`` runs grade three exercises of a handout, a few times.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest
from submission_tools import COURSE, EXERCISES, KIT, SOLUTIONS
from zoo.catalog import BY_NAME

from grader.core.engine import SubmissionResult

# A softmax that returns complex numbers: checking it makes NumPy warn in the grading process
from grader.integrations.outputs import report
from grader.integrations.routes import handout

# A softmax that returns complex numbers: checking it makes NumPy warn in the grading process
# (ComplexWarning), which the handout's `filterwarnings = error` must not turn into a failure
# that `grade` does not report.
COMPLEX_SOFTMAX = """\
    import numpy as np


    def softmax(logits, axis=-1):
        return np.asarray(logits).astype(np.complex128)
"""
WRONG_ATTENTION = "attention_mask_after_softmax"


def pytest_run(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m pytest ARGS`` in ``folder`` (whose grader package the plugin is then)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)


def collected(run: subprocess.CompletedProcess) -> list[str]:
    return [line for line in run.stdout.splitlines() if "::" in line]


def visible_ids(names) -> list[str]:
    return [f"exercises/{name}.py::{c.name}" for name in names
            for c in EXERCISES[name].checks if not c.hidden]


def outcomes(path: Path) -> dict[str, tuple[str, str]]:
    """A JUnit XML file's testcases: ``exercise: check`` -> (outcome, text)."""
    found = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        exercise = case.get("classname").split(".")[-1]
        outcome, text = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome, text = child.tag, child.text or child.get("message") or ""
        found[f"{exercise}: {case.get('name')}"] = (outcome, text)
    return found


@pytest.fixture(scope="module")
def handout_copy(tmp_path_factory) -> Path:
    """A handout: softmax complex, attention a zoo entry with one mistake, the rest stubs."""
    folder = handout.build(tmp_path_factory.mktemp("dist") / "handout")
    (folder / "exercises" / "softmax.py").write_text(textwrap.dedent(COMPLEX_SOFTMAX))
    (folder / "exercises" / "attention.py").write_text(BY_NAME[WRONG_ATTENTION].source())
    return folder


# -- the verdicts are grade's, on the zoo ----------------------------------------------------------
def test_each_verdict_is_grades_on_every_zoo_entry_and_check(zoo_results):
    """An item passes exactly when ``grade`` gives its check full points, and a failing one
    says what the report's JSON says of it: for every check of every zoo entry."""
    from grader.integrations.routes.pytest_plugin import verdicts

    seen: Counter[str] = Counter()
    for entry, results in zoo_results.items():
        tests = {t["name"]: t for t in report.to_json(SubmissionResult(entry, results, True))
                 ["tests"]}
        for name, result in results.items():
            found = verdicts(result)
            assert list(found) == [c.name for c in result.checks] != []
            assert {c.name for c in result.checks} == {c.name for c in EXERCISES[name].checks}
            for check in result.checks:
                test = tests[f"{'bonus ' if result.track == 'bonus' else ''}{name}: {check.name}"]
                verdict = found[check.name]
                full = check.points == check.max_points
                assert (verdict.outcome == "passed") == full == (test["status"] == "passed")
                if not full:
                    assert verdict.text == test["output"], (entry, check.name)
                seen[verdict.outcome] += 1
    assert seen["passed"] > 1000 and seen["failed"] > 100, seen


def test_the_catalogue_is_what_the_modules_declare():
    from grader.core.course import load
    from grader.integrations.routes.pytest_plugin import catalogue, declared

    listed = catalogue()
    assert list(listed) == sorted(EXERCISES)
    for name, exercise in EXERCISES.items():
        entry = listed[name]
        assert (entry.track, entry.points, entry.order) == (
            exercise.track, exercise.points, exercise.order)
        assert entry.checks == tuple((c.name, c.hidden) for c in exercise.checks)
    course = load(known=listed)
    assert [(s.exercise.name, s.enabled, s.track, s.points, s.order) for s in course.settings] == [
        (s.exercise.name, s.enabled, s.track, s.points, s.order) for s in COURSE.settings]
    # A declaration that is not plain literals is read by importing the modules instead.
    assert declared("EX = Exercise('x', track='core', points=P, order=1)\n") is None


# -- pytest in a handout ---------------------------------------------------------------------------
def test_collection_lists_every_check_without_torch_or_the_students_code(handout_copy):
    code = ("import sys, pytest; code = pytest.main(['--collect-only', '-q']); "
            "print('imported:', [m for m in ('torch', 'numpy', 'softmax', 'exercises') "
            "if m in sys.modules]); sys.exit(code)")
    run = subprocess.run([sys.executable, "-c", code], cwd=handout_copy, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert collected(run) == visible_ids(COURSE.names())  # course order, no hidden check
    assert "imported: []" in run.stdout
    assert "warning" not in run.stdout.lower()
    seconds = float(re.search(r"collected in ([\d.]+)s", run.stdout)[1])
    print(f"collection: {seconds} s")


def test_markers_and_keywords_select_as_expected(handout_copy):
    bonus = pytest_run(handout_copy, "--collect-only", "-q", "--strict-markers", "-m", "bonus")
    assert collected(bonus) == visible_ids(COURSE.names("bonus")), bonus.stdout
    core = pytest_run(handout_copy, "--collect-only", "-q", "-m", "core and visible",
                      "-k", "softmax")
    assert collected(core) == [i for i in visible_ids(COURSE.names("core")) if "softmax" in i]
    hidden = pytest_run(handout_copy, "--collect-only", "-q", "-m", "hidden")
    assert collected(hidden) == [] and "deselected" in hidden.stdout  # none in a handout


def test_a_run_gives_grades_verdicts_text_and_table(handout_copy, tmp_path):
    """``pytest exercises/softmax.py exercises/attention.py`` against ``grade --json`` on the
    same files: the same verdict and text for each check, the same table; then ``--lf``
    selects exactly the failures."""
    xml = tmp_path / "run.xml"
    run = pytest_run(handout_copy, "exercises/attention.py", "exercises/softmax.py",
                     f"--junitxml={xml}")
    assert run.returncode == 1, run.stdout + run.stderr
    graded = subprocess.run(
        [sys.executable, "-m", "grader", "grade", "exercises", "--exercise", "softmax",
         "--exercise", "attention", "--json", str(tmp_path / "grade.json")],
        cwd=handout_copy, capture_output=True, text=True, timeout=300)
    assert graded.returncode == 0, graded.stderr
    tests = {t["name"]: t for t in json.loads((tmp_path / "grade.json").read_text())["tests"]}
    found = outcomes(xml)
    assert list(found) == [f"{n}: {c.split('::')[1]}"
                           for n in ("softmax", "attention") for c in visible_ids([n])]
    assert sorted(found) == sorted(tests)
    for name, (outcome, text) in found.items():
        assert outcome == ("passed" if tests[name]["status"] == "passed" else "failure"), name
        if outcome == "failure":
            assert text == tests[name]["output"], name
    assert Counter(o for o, _ in found.values()) == {"passed": 10, "failure": 15}
    assert "Traceback" not in run.stdout and 'File "' not in run.stdout
    table = graded.stdout.split("\n\n== ")[0].split("\n", 2)[2]  # after "Grading exercises"
    assert table in run.stdout and "total          " in table

    again = pytest_run(handout_copy, "--lf", "--collect-only", "-q")
    failed = [f"exercises/{n.split(':')[0]}.py::{n.split(': ')[1]}"
              for n, (outcome, _) in found.items() if outcome == "failure"]
    assert sorted(collected(again)) == sorted(failed)


def test_x_stops_at_the_first_failing_check_and_a_stub_is_xfail(handout_copy, tmp_path):
    xml = tmp_path / "run.xml"
    run = pytest_run(handout_copy, "-x", f"--junitxml={xml}", "exercises/attention.py",
                     "exercises/softmax_backward.py")
    assert run.returncode == 1, run.stdout + run.stderr
    found = list(outcomes(xml).items())
    stub = visible_ids(["softmax_backward"])  # before attention, in the course's order
    assert [o for _, (o, _) in found[:len(stub)]] == ["skipped"] * len(stub)
    assert all(text.startswith("not implemented yet") for _, (_, text) in found[:len(stub)])
    rest = [o for _, (o, _) in found[len(stub):]]
    assert rest[-1] == "failure" and set(rest[:-1]) == {"passed"}
    assert len(found) < len(stub) + len(visible_ids(["attention"]))
    assert "stopping after 1 failures" in run.stdout
    assert re.search(r"^softmax_backward +0 / 14  not implemented yet$", run.stdout, re.M)
    assert re.search(r"^attention +13 / 19  4 checks failing$", run.stdout, re.M)


def test_the_table_says_what_the_hidden_checks_add_to_the_bonus(handout_copy):
    """The bonus total too (it once read ``bonus total  0 / 9`` alone, of masks' 10 points)."""
    run = pytest_run(handout_copy, "exercises/masks.py")
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"^bonus total +0 / 9\n\n\(1 more bonus point comes from hidden checks "
                     r"your instructor runs\.\)$", run.stdout, re.M), run.stdout
    # a run of bonus checks alone shows no core table (issue 45: "total 0 / 0")
    assert not re.search(r"^(total|exercise) ", run.stdout, re.M), run.stdout


def test_the_handout_runs_pytest_with_its_own_settings(handout_copy):
    text = (handout_copy / "pyproject.toml").read_text()
    assert 'testpaths = ["exercises"]' in text and 'testpaths = ["tests"]' not in text
    assert 'filterwarnings = ["error"]' in text and "pytest11" in text


# -- pytest in the kit -----------------------------------------------------------------------------
def test_the_kits_own_tests_collect_as_without_the_plugin(request):
    """In the kit's own test run the plugin is loaded and adds nothing (not even the course is
    read for it); in the kit's folder it adds the exercises' items where they are asked for,
    the hidden ones too (the answer key is there)."""
    from grader.integrations.routes import pytest_plugin

    config = request.config
    assert config.pluginmanager.has_plugin("attention_kit")
    ours = [i for i in request.session.items if isinstance(i, pytest_plugin.CheckItem)]
    if not any(i.path.parent == KIT / "exercises" for i in request.session.items):
        assert ours == [] and pytest_plugin.KIT not in config.stash
    hidden = pytest_run(KIT, "--collect-only", "-q", "-m", "hidden", "exercises")
    assert collected(hidden) == [f"exercises/{n}.py::{c.name}" for n in COURSE.names()
                                 for c in EXERCISES[n].checks if c.hidden]
    assert all((SOLUTIONS / f"{n}.py").is_file() for n in COURSE.names())
