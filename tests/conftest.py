"""Shared fixtures. Helpers for building submissions are in ``submission_tools``, the real
nbgrader courses in ``nbgrader_tools``."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

# The kit's tests grade with an empty course secret (it reaches the CLI runs they start too):
# the hidden checks then draw what they drew before secrets existed, and the scores recorded in
# tests/zoo/scores.json stay comparable. Tests of the secret itself set their own.
os.environ["ATTENTION_KIT_SECRET"] = ""
from submission_tools import SOLUTIONS


@pytest.fixture(scope="session")
def key_result():
    """The answer key graded once per test session (public and hidden checks)."""
    from grader.core import engine

    return engine.grade_submission(SOLUTIONS)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--exercise", action="append", default=[], metavar="NAME",
        help="only the tests of this exercise (repeatable): a test parametrized by another "
             "exercise or by another exercise's zoo entry is left out, and so is a test over "
             "the whole zoo; the zoo is graded for this exercise's entries only")


def exercise_of(item: pytest.Item) -> str | None:
    """The exercise a test is parametrized by (an exercise, its name, or a zoo entry), or
    None."""
    params = item.callspec.params if hasattr(item, "callspec") else {}
    for value in (params.get("exercise"), params.get("entry")):
        name = value if isinstance(value, str) else getattr(
            value, "exercise" if hasattr(value, "kind") else "name", None)
        if isinstance(name, str):
            return name
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    names = config.getoption("--exercise")
    if not names:
        return
    from submission_tools import EXERCISES

    unknown = sorted(set(names) - set(EXERCISES))
    if unknown:
        raise pytest.UsageError(f"--exercise {', '.join(unknown)}: no such exercise (one of "
                                f"{', '.join(EXERCISES)})")
    kept, left = [], []
    for item in items:
        exercise = exercise_of(item)
        whole_zoo = {"zoo_graded", "zoo_results"} & set(getattr(item, "fixturenames", ()))
        ours = exercise in names if exercise is not None else not whole_zoo
        (kept if ours else left).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


@pytest.fixture(scope="session")
def zoo_graded(key_result, pytestconfig):
    """Every zoo entry graded once per test session (``zoo.catalog.grade_many``), or with
    ``--exercise`` the entries of those exercises: entry -> SubmissionResult. The zoo's tests,
    the pytest plugin's and the golden outputs' read the same grades."""
    from zoo.catalog import ENTRIES, grade_many

    names = pytestconfig.getoption("--exercise")
    return grade_many([e for e in ENTRIES if not names or e.exercise in names], processes=2,
                      key=key_result)


@pytest.fixture(scope="session")
def zoo_results(zoo_graded):
    """``zoo_graded``'s results by exercise: entry -> exercise -> ExerciseResult."""
    return {name: result.results for name, result in zoo_graded.items()}


@pytest.fixture(scope="session")
def nbgrader_base():
    """A folder other users may enter, as a course folder usually is: only the isolation then
    keeps a student's code out of the courses built in it."""
    base = Path(tempfile.mkdtemp(prefix="attention-kit-nbgrader-"))
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def released_course(nbgrader_base: Path) -> Path:
    import nbgrader_tools

    return nbgrader_tools.released(nbgrader_base)


@pytest.fixture(scope="session")
def nbgrader_course(nbgrader_base: Path, released_course: Path) -> Path:
    """Plain ``nbgrader autograde`` (the kernel route); see ``nbgrader_tools``."""
    import nbgrader_tools

    return nbgrader_tools.plain_course(nbgrader_base, released_course)


@pytest.fixture(scope="session")
def isolated_course(nbgrader_base: Path, released_course: Path) -> tuple[Path, str]:
    """``python -m grader nbgrader autograde``; see ``nbgrader_tools``."""
    import nbgrader_tools

    return nbgrader_tools.isolated_course(nbgrader_base, released_course)


@pytest.fixture(scope="session")
def golden_class(tmp_path_factory) -> dict[str, str]:
    """The golden class (``tests/golden.py``) graded once per session by ``batch`` with a roster
    and both exports, then reported again from its JSON: every file written, by golden name.
    The demo class's test and the golden outputs' read the same files."""
    import golden

    folder = tmp_path_factory.mktemp("golden-class")
    golden.write_class(folder)
    return golden.class_outputs(folder)
