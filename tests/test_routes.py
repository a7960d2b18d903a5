"""One score whatever the route: a submission with six typical mistakes (one zoo entry per core
exercise) gets the same points and the same feedback, check by check, from ``grade``,
``batch``, the Gradescope runner and the notebook kernel; and the examples a check draws do not
depend on which modules happen to be loaded, nor on the working directory.

Every route runs in a fresh process of its own, started from a folder other than the kit's, as
an instructor or a student would run it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from submission_tools import CORE, KIT, SOLUTIONS
from zoo.catalog import BY_NAME, build

from grader.integrations.routes.kernel import exercise_file

SAMPLE = ("softmax_overflow", "backward_diagonal", "attention_mask_after_softmax",
          "heads_split_scrambled", "mha_mask_polarity", "kv_upper_left")

# The notebook route: each answer cell run through %%exercise's code, then every test cell's
# score() (visible and hidden checks), in one kernel-like process.
NOTEBOOK = """\
import json, sys
from grader.integrations.routes import kernel
from grader.integrations.outputs import report

cells = json.loads(open(sys.argv[1]).read())
namespace, points, tests = {}, {}, []
for name, cell in cells.items():
    kernel.run_exercise_cell(name, cell, namespace)
for name in cells:
    points[name] = kernel.score(name) + kernel.score(name, hidden=True)
    tests += report.to_json(kernel._result(name))["tests"]
json.dump({"points": points, "tests": tests}, open(sys.argv[2], "w"))
"""


def cells() -> dict[str, str]:
    """The sample as notebook answer cells: each core exercise's file, one entry per file."""
    by_exercise = {BY_NAME[name].exercise: BY_NAME[name] for name in SAMPLE}
    assert sorted(by_exercise) == sorted(CORE)
    return {name: by_exercise[name].source() for name in CORE}


def write_submission(folder: Path, answers: dict[str, str]) -> Path:
    """The files a notebook saves for ``answers``, so that every route grades the same bytes."""
    folder.mkdir(parents=True)
    for name, cell in answers.items():
        (folder / f"{name}.py").write_text(exercise_file(name, cell))
    return folder


def by_test(tests: list[dict]) -> dict[str, tuple]:
    return {t["name"]: (t["score"], t["max_score"], t["status"], t["output"]) for t in tests}


@pytest.fixture(scope="module")
def routes(tmp_path_factory):
    """Each route's results, keyed by route; the four run at once, each in its own process."""
    tmp = tmp_path_factory.mktemp("routes")
    answers = cells()
    submission = write_submission(tmp / "files" / "student", answers)
    (tmp / "answers.json").write_text(json.dumps(answers))
    gradescope = tmp / "autograder"
    shutil.copytree(submission, gradescope / "submission")
    shutil.copytree(SOLUTIONS, gradescope / "source" / "solutions")
    shutil.copyfile(KIT / "course.toml", gradescope / "source" / "course.toml")
    grader = [sys.executable, "-m", "grader"]
    commands = {
        "grade": grader + ["grade", str(submission), "--json", str(tmp / "grade.json")],
        "batch": grader + ["batch", str(tmp / "files"), "--csv", str(tmp / "grades.csv"),
                           "--json-dir", str(tmp / "batch"), "--jobs", "1"],
        "gradescope": grader + ["gradescope", "run", "--root", str(gradescope)],
        "notebook": [sys.executable, "-c", NOTEBOOK, str(tmp / "answers.json"),
                     str(tmp / "notebook.json")],
    }
    running = {route: subprocess.Popen(command, cwd=tmp, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)
               for route, command in commands.items()}
    for route, process in running.items():
        out, err = process.communicate(timeout=900)
        assert process.returncode == 0, f"{route}:\n{out}\n{err}"
    return {
        "grade": json.loads((tmp / "grade.json").read_text()),
        "batch": json.loads((tmp / "batch" / "student.json").read_text()),
        "gradescope": json.loads((gradescope / "results" / "results.json").read_text()),
        "notebook": json.loads((tmp / "notebook.json").read_text()),
    }


def test_every_route_gives_every_check_the_same_score_and_feedback(routes):
    reference = by_test(routes["grade"]["tests"])
    assert len(reference) > 50 and any(status == "failed" for _, _, status, _ in
                                       reference.values())
    core = {name: result for name, result in reference.items() if not name.startswith("bonus")}
    for route in ("batch", "gradescope", "notebook"):
        tests = by_test(routes[route]["tests"])
        if route == "notebook":  # a notebook has no bonus files: compare the core checks
            assert tests == core, route
        else:
            assert tests == reference, route


def test_every_route_gives_the_same_total(routes):
    score = routes["grade"]["score"]
    assert 0 < score < 100
    assert routes["batch"]["score"] == routes["gradescope"]["score"] == score
    assert sum(routes["notebook"]["points"].values()) == score
    exercises = routes["grade"]["extra_data"]["exercises"]
    assert routes["notebook"]["points"] == {n: exercises[n]["score"] for n in CORE}
    assert all(exercises[n]["misconceptions"] for n in CORE)  # each mistake is named


# A module full of literals, as a course's helper or a test file might be: Hypothesis used to mix
# the literals of every loaded module outside site-packages into its draws.
LITERALS = "VALUES = ({})\n".format(", ".join(
    [repr(x) for x in (0.1, -2.5, 3.14159, 1e-300, 1e300, -0.0, 7.75, 2.0**-20, 999.0)]
    + [str(n) for n in (3, 7, 13, 255, 1000, 65535, 2**31 - 1, -12)]))

GRADE_ONE = """\
import json, sys
{imports}
from grader.core import engine
from grader.integrations.outputs import report

result = engine.grade_submission(sys.argv[1], exercises=["attention"])
print(json.dumps(report.to_json(result), sort_keys=True))
"""


def test_examples_do_not_depend_on_loaded_modules_or_the_working_directory(tmp_path):
    # Scores in float32 on float64 input: some examples fail and some pass, so which checks
    # fail, and on which input, shows which examples were drawn.
    submission = build(BY_NAME["attention_float32_scores"], tmp_path)
    (tmp_path / "course_helpers.py").write_text(LITERALS)
    plain = GRADE_ONE.format(imports="")
    loaded = GRADE_ONE.format(imports=textwrap.dedent("""\
        sys.path.insert(0, sys.argv[2])
        import course_helpers  # noqa: F401
        import grader.integrations.routes.batch, grader.integrations.routes.gradescope  # noqa: F401
        import grader.integrations.routes.kernel, grader.integrations.routes.notebook  # noqa: F401
    """))
    processes = [subprocess.Popen([sys.executable, "-c", script, str(submission), str(tmp_path)],
                                  cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
                 for script, cwd in ((plain, tmp_path), (loaded, tmp_path), (plain, KIT))]
    runs = []
    for process in processes:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
        runs.append(json.loads(out))
    assert runs[0] == runs[1] == runs[2]
    failing = [t for t in runs[0]["tests"] if t["status"] == "failed"]
    assert failing and runs[0]["extra_data"]["exercises"]["attention"]["score"] < 20
