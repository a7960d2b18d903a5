"""The course file: the shipped one is today's rubric, a changed one is read the same way by
every route (grade, batch, Gradescope, the notebook), and a bad one is a clear error."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from submission_tools import COURSE, EXERCISES, KIT, SOLUTIONS, make_submission

from grader.core import engine
from grader.core.course import COURSE_ENV, CourseError, apportion, load
from grader.integrations.routes import gradescope, kernel, notebook, stubs

# The attention answer computed in float32 on float64 input: wrong at the default float64
# tolerance, right when the course accepts float32 accuracy.
FLOAT32_INSIDE = (SOLUTIONS / "attention.py").read_text().replace(
    "    weights = softmax(scores, axis=-1)\n    return weights @ v, weights",
    "    weights = softmax(scores.astype(np.float32), axis=-1)\n"
    "    return (weights @ v.astype(np.float32)).astype(q.dtype), weights.astype(q.dtype)",
)
CHANGED = """
[course]
examples = 10

[course.tolerances]
float64 = { rtol = 1e-4, atol = 1e-5 }

[exercises.softmax]
points = 7.5

[exercises.attention]
points = 40

[exercises.heads]
enabled = false

[exercises.masks]
track = "core"
points = 5
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "course.toml"
    path.write_text(text)
    return path


def test_shipped_course_is_every_exercise_with_its_own_defaults():
    assert COURSE.names("core") == ["softmax", "softmax_backward", "attention", "heads", "mha",
                                    "kv_cache"]
    assert COURSE.names("bonus")[:4] == ["masks", "attention_backward", "gqa", "decode"]
    assert COURSE.total() == 100
    assert COURSE.total("bonus") == sum(e.points for e in EXERCISES.values() if e.track == "bonus")
    for setting in COURSE.settings:
        assert setting.enabled and setting.track == setting.exercise.track
        assert setting.points == setting.exercise.points
        assert COURSE.check_points(setting.exercise) == {
            c.name: c.points for c in setting.exercise.checks}
    assert (COURSE.examples, COURSE.hints) == (10, True)
    assert COURSE.tolerances == {"float64": (1e-7, 1e-9), "float32": (1e-4, 1e-5)}


@pytest.mark.parametrize("text, message", [
    ("[exercises.sofmax]\npoints = 3\n", "unknown exercise 'sofmax'"),
    ("[exercises.softmax]\npoint = 3\n", "exercises.softmax: keys are"),
    ("[exercises.softmax]\npoints = -1\n", "points must be a positive number"),
    ("[exercises.softmax]\ntrack = 'extra'\n", "track must be one of"),
    ("[course]\nexamples = 0\n", "course.examples must be a positive integer"),
    ("[course.tolerances]\nfloat16 = { rtol = 1, atol = 1 }\n", "course.tolerances.float16"),
    ("[course]\nhint = true\n", "unknown [course] key ['hint']"),
    ("[exercises\n", "course.toml"),
])
def test_a_bad_course_file_is_a_clear_error(tmp_path, text, message):
    with pytest.raises(CourseError, match=re.escape(message)):
        load(write(tmp_path, text))
    run = subprocess.run([sys.executable, "-m", "grader", "grade", str(SOLUTIONS), "--course",
                          str(tmp_path / "course.toml")], capture_output=True, text=True,
                         cwd=KIT, timeout=120)
    assert run.returncode == 2 and run.stderr.startswith("error: ") and not run.stdout


def test_apportion_sums_to_the_total_in_hundredths():
    assert apportion([2, 1, 3, 1, 1, 2, 1, 1, 1, 1], 14) == [2, 1, 3, 1, 1, 2, 1, 1, 1, 1]
    assert apportion([1, 1, 1], 10) == [3.34, 3.33, 3.33]
    for total in (1, 7.5, 12.34, 40, 99.99):
        for weights in ([4, 2, 2, 2, 1, 1], [1], [3, 3, 1]):
            assert round(sum(apportion(weights, total)), 2) == total


def test_changed_points_scale_every_check_and_keep_visible_points_without_hidden_ones(tmp_path):
    course = load(write(tmp_path, CHANGED))
    assert course.names("core") == ["softmax", "softmax_backward", "attention", "mha", "kv_cache",
                                    "masks"]
    assert course.total() == 7.5 + 15 + 40 + 25 + 15 + 5
    for name in course.names():
        points = course.check_points(EXERCISES[name])
        assert round(sum(points.values()), 2) == course.points(name)
    attention = course.check_points(EXERCISES["attention"])
    assert all(attention[c.name] == 2 * c.points for c in EXERCISES["attention"].checks)
    # The handout has no hidden checks: its visible checks keep the same points.
    softmax = EXERCISES["softmax"]
    visible = sum(p for n, p in course.check_points(softmax).items()
                  if not next(c for c in softmax.checks if c.name == n).hidden)
    assert visible == pytest.approx(7.5 * 14 / 15, abs=0.01)
    assert "heads.py" not in stubs.stub_sources(course=course)


def _check_points(tests: list[dict]) -> dict[str, float]:
    return {t["name"]: t["score"] for t in tests}


def test_a_changed_course_grades_the_same_on_every_route(tmp_path):
    course_file = write(tmp_path, CHANGED)
    course = load(course_file)
    student = make_submission(tmp_path / "class" / "student", {"attention.py": FLOAT32_INSIDE})
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}

    # grade
    graded = tmp_path / "grade.json"
    run = subprocess.run([sys.executable, "-m", "grader", "grade", str(student), "--course",
                          str(course_file), "--json", str(graded)], capture_output=True,
                         text=True, cwd=KIT, timeout=600, env=env)
    assert run.returncode == 0, run.stderr
    by_grade = json.loads(graded.read_text())
    assert by_grade["score"] == course.total()  # float32 accuracy is enough in this course
    assert by_grade["extra_data"]["exercises"]["attention"]["score"] == 40
    assert "heads" not in by_grade["extra_data"]["exercises"]
    assert by_grade["extra_data"]["exercises"]["masks"]["max_score"] == 5

    # batch
    run = subprocess.run([sys.executable, "-m", "grader", "batch", str(tmp_path / "class"),
                          "--csv", str(tmp_path / "grades.csv"), "--json-dir",
                          str(tmp_path / "json"), "--course", str(course_file), "--jobs", "1"],
                         capture_output=True, text=True, cwd=KIT, timeout=600, env=env)
    assert run.returncode == 0, run.stderr
    by_batch = json.loads((tmp_path / "json" / "student.json").read_text())
    assert _check_points(by_batch["tests"]) == _check_points(by_grade["tests"])
    header, row = (tmp_path / "grades.csv").read_text().splitlines()
    assert header.split(",")[:8] == ["student", *course.names("core"), "total"]
    assert row.split(",")[7] == f"{course.total():g}"

    # Gradescope: the bundle carries the course file
    root = tmp_path / "autograder"
    with zipfile.ZipFile(gradescope.build(tmp_path / "bundle.zip", course_file)) as archive:
        archive.extractall(root / "source")
    shutil.copytree(student, root / "submission")
    run = subprocess.run([sys.executable, "-m", "grader", "gradescope", "run", "--root",
                          str(root)], capture_output=True, text=True, cwd=root / "source",
                         timeout=600, env=env)
    assert run.returncode == 0, run.stderr
    by_gradescope = json.loads((root / "results" / "results.json").read_text())
    assert _check_points(by_gradescope["tests"]) == _check_points(by_grade["tests"])

    # the notebook: test cells worth the course's points, the kernel grading with its course
    cells = {c["id"]: c for c in notebook.notebook(course=course)["cells"]}
    for name in course.names("core"):
        tests = [t for t in by_grade["tests"] if t["tags"][0] == name]
        visible = sum(t["max_score"] for t in tests if t["visibility"] == "visible")
        assert cells[f"{name.replace('_', '-')}-tests"]["metadata"]["nbgrader"]["points"] == (
            pytest.approx(visible))
    os.environ[COURSE_ENV] = str(course_file)
    try:
        kernel.run_exercise_cell("attention", FLOAT32_INSIDE, {})
        total = kernel.score("attention") + kernel.score("attention", hidden=True)
    finally:
        del os.environ[COURSE_ENV]
    assert total == by_grade["extra_data"]["exercises"]["attention"]["score"] == 40


def test_default_course_still_fails_the_float32_answer(tmp_path):
    student = make_submission(tmp_path / "student", {"attention.py": FLOAT32_INSIDE})
    result = engine.grade_submission(student, exercises=["attention"])
    assert result.exercises["attention"].score < 20


def test_each_exercises_framework_is_read_from_its_module_without_importing_it():
    """``grade --exercise`` starts only the zygotes its exercises need, before the grading
    process imports torch: the framework read from the module's text is the declared one."""
    from grader.core.course import EXERCISES_BY_NAME
    from grader.problems import frameworks

    for name, exercise in EXERCISES_BY_NAME().items():
        assert frameworks([name]) == {exercise.framework}, name
    assert frameworks(["softmax", "mha"]) == {"numpy", "torch"}
    assert frameworks(["no_such_exercise"]) is None  # then every zygote starts
