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


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]):
    names = config.getoption("--exercise")
    if names:
        keep_exercises(config, items, names)
    if getattr(config.option, "loadgroup", False):  # an xdist worker of --dist loadgroup
        group_shared_fixtures(items)
    yield
    keep_group_suffix(items)


def keep_exercises(config: pytest.Config, items: list[pytest.Item], names: list[str]) -> None:
    """``--exercise``: deselect the tests of the other exercises and those over the whole zoo."""
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


def group_shared_fixtures(items: list[pytest.Item]) -> None:
    """Split over processes (``make test``: pytest-xdist, ``--dist loadgroup``), the tests that
    share a fixture made once per module or session run in one process, so it is still made
    once: the zoo graded once per run, a module's graded class once. Tests joined through any
    such fixture of the kit's tests (transitively: the zoo's tests and the golden outputs
    share ``key_result``) form one group, named after its first fixture (a module's after
    the module too); a test that shares none is scheduled on its own. Runs before xdist
    reads the marks."""
    if not items:
        return
    tests = Path(__file__).parent.relative_to(items[0].config.rootpath).as_posix()
    parent = list(range(len(items)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[tuple[str, str], int] = {}  # a shared fixture -> the first test that uses it
    for i, item in enumerate(items):
        # pytest's own record of the fixtures a test resolves to (it has no public one)
        info = getattr(item, "_fixtureinfo", None)
        for name, definitions in (info.name2fixturedefs.items() if info else ()):
            fixture = definitions[-1]  # the definition this test gets
            ours = fixture.baseid == tests or fixture.baseid.startswith(f"{tests}/")
            if ours and fixture.scope != "function":
                parent[root(i)] = root(first.setdefault((fixture.baseid, name), i))
    named: dict[int, str] = {}  # a group's name: its first fixture's, a module's after it
    for (where, name), i in sorted(first.items(), key=lambda pair: pair[0][::-1]):
        named.setdefault(root(i), name if where == tests else f"{Path(where).stem}.{name}")
    for i, item in enumerate(items):
        if root(i) in named:
            item.add_marker(pytest.mark.xdist_group(named[root(i)]))


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


def keep_group_suffix(items: list[pytest.Item]) -> None:
    """xdist's ``--dist loadgroup`` sends a test's group to the scheduler as a ``@group`` suffix
    it writes to ``item._nodeid``; pytest 9.2 reads a test's id from ``item._id`` instead, so
    the suffix is lost and every group split (pytest-xdist issue 1386). Write it where pytest
    reads it; nothing to do once either side is fixed, or outside xdist."""
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # a pytest before structured ids: xdist's suffix holds
        return
    for item in items:
        suffixed = getattr(item, "_nodeid", None)
        if isinstance(suffixed, str) and suffixed != item.nodeid and "@" in suffixed:
            item._id = NodeId.parse(suffixed)
