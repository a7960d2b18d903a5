"""The checks as pytest tests: ``pytest`` in the kit's folder (or the handout's) collects every
check of every exercise as one item, ``exercises/<exercise>.py::<check>``, marked ``core`` or
``bonus`` and ``visible`` or ``hidden``, and ends with the table ``make grade`` prints.

Registered by the ``pytest11`` entry point ``attention_kit`` (``-p no:attention_kit`` turns it
off). It is no second grader: the first item of an exercise to run grades that exercise once,
through the engine and the isolated workers of ``python -m grader grade`` with the same course,
answer key and examples, and every item of it reads its verdict from that result
(``verdicts``): an item passes exactly when the check got full points, fails with the report's
text for it (no traceback into the grader), and a check the code has not implemented yet is an
xfail.

It acts only where ``pytest``'s root folder is the folder of the kit this plugin belongs to
(the kit's own, or a handout's, with its ``exercises/``), and only on the files there named
like an enabled exercise: the kit's own tests (``tests/``) collect and run as without it.
Collection reads the exercise modules' source (their ``EX = Exercise(...)`` and
``@EX.check(...)`` lines) and imports neither torch nor a student's file.

Hidden checks: they are items only where ``make grade`` runs them, next to the answer key
(``solutions/``, the instructor's copy), marked ``hidden``. A handout has neither the key nor
the hidden checks' code; there the table says, as ``make grade`` does, how many points they add.
Where they run, the first item grades every exercise the session selected at once, as ``grade``
does: every visible phase before any hidden one (``grader.core.phases``).
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

GRADER = Path(__file__).resolve().parents[2]
KIT_ROOT = GRADER.parent  # what grader.core.course calls KIT_ROOT, known without importing it
MARKERS = {
    "core": "a check of a core exercise (its points count toward the score)",
    "bonus": "a check of a bonus exercise (graded apart from the score)",
    "visible": "a public check",
    "hidden": "an answer-key comparison (only where the answer key is)",
}
# What Python ignores unless told otherwise: ``python -m grader grade`` grades under Python's
# own filters, where a warning is shown (these ignored) and never raised. The project's
# ``filterwarnings = error`` is for its tests: under it, a student's complex softmax made the
# grading process's ComplexWarning an error, and a check's feedback differed from ``grade``'s.
IGNORED_BY_DEFAULT = (DeprecationWarning, PendingDeprecationWarning, ImportWarning,
                      ResourceWarning)
NOT_IMPLEMENTED = "not implemented yet"


# -- what the exercise modules declare, read from their source -------------------------------------
@dataclass(frozen=True)
class Declared:
    """An exercise as its module declares it; enough for ``grader.core.course.parse``."""

    name: str
    track: str
    points: float
    order: float
    checks: tuple[tuple[str, bool], ...]  # (name, hidden), in the order they are declared

    @property
    def filename(self) -> str:
        return f"{self.name}.py"


def _is_ex(node: ast.AST, attribute: str | None = None) -> bool:
    if attribute is not None:
        return (isinstance(node, ast.Attribute) and node.attr == attribute
                and _is_ex(node.value))
    return isinstance(node, ast.Name) and node.id == "EX"


def declared(source: str) -> Declared | None:
    """What an exercise module declares: its ``EX = Exercise("name", track=..., points=...,
    order=...)`` and its ``@EX.check(...)`` functions. None when the source does not say it in
    literals (the caller then imports the modules)."""
    found: dict[str, Any] | None = None
    checks = []
    for node in ast.parse(source).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and _is_ex(node.targets[0])
                and isinstance(node.value, ast.Call) and node.value.args):
            call = node.value
            try:
                found = {"name": ast.literal_eval(call.args[0])} | {
                    k.arg: ast.literal_eval(k.value) for k in call.keywords
                    if k.arg in ("track", "points", "order")}
            except ValueError:
                return None
        elif isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and _is_ex(decorator.func, "check"):
                    hidden = [k.value for k in decorator.keywords if k.arg == "hidden"]
                    try:
                        checks.append((node.name, bool(hidden and ast.literal_eval(hidden[0]))))
                    except ValueError:
                        return None
    if found is None or set(found) != {"name", "track", "points", "order"}:
        return None
    return Declared(checks=tuple(checks), **found)


def catalogue() -> dict[str, Declared]:
    """Every exercise module's declaration, by name, as ``grader.problems.discover`` finds
    them; from the source when it states them plainly, else from the imported modules."""
    found: dict[str, Declared] = {}
    for path in sorted((GRADER / "problems").iterdir()):
        name = path.stem if path.suffix == ".py" else path.name
        if name.startswith("_") or not (path.suffix == ".py" or (path / "__init__.py").is_file()):
            continue
        # a package (mha/): the one of its modules that declares EX and the checks
        files = [path] if path.suffix == ".py" else sorted(path.glob("*.py"))
        entries = [e for e in (declared(f.read_text()) for f in files) if e is not None]
        if len(entries) != 1 or entries[0].name != name:
            return _imported()
        found[name] = entries[0]
    return found


def _imported() -> dict[str, Declared]:
    from ...problems import discover

    return {name: Declared(name, e.track, e.points, e.order,
                           tuple((c.name, c.hidden) for c in e.checks))
            for name, e in discover().items()}


# -- the verdicts: one exercise's result, check by check -------------------------------------------
@dataclass(frozen=True)
class Verdict:
    outcome: str  # "passed", "failed" or "not implemented"
    text: str  # the report's text for the check: its JSON output (empty when it passed)


def verdicts(result: Any) -> dict[str, Verdict]:
    """Each check's verdict in ``result`` (an ``ExerciseResult``): passed when ``grade`` gave
    it full points, "not implemented" when the code raised NotImplementedError for it, else
    failed with the feedback ``grade`` wrote for it (what its report and JSON show)."""
    found = {}
    for c in result.checks:
        if c.passed:
            found[c.name] = Verdict("passed", "")
        elif c.feedback.startswith(NOT_IMPLEMENTED):
            found[c.name] = Verdict("not implemented", c.feedback)
        else:
            found[c.name] = Verdict("failed", c.feedback)
    return found


# -- the session's state ---------------------------------------------------------------------------
class Kit:
    """The exercises of ``root`` (the kit's folder) and what this session graded of them."""

    def __init__(self, root: Path):
        from ...core.course import load

        self.root = root
        self.folder = root / "exercises"
        self.course = load(known=catalogue())  # the rubric `make grade` reads, as declared
        self.grading: Any = None  # the run that grades (GradingRun): the same course, loaded
        #                             with the exercises themselves
        key = KIT_ROOT / "solutions"  # course.DEFAULT_KEY: hidden checks run only next to it
        self.key = key if all((key / f"{n}.py").is_file()
                              for n in self.course.names("core")) else None
        self.results: dict[str, Any] = {}  # exercise -> ExerciseResult, in the order graded
        self.failures: dict[str, str] = {}  # exercise -> why it could not be graded
        self.skipped: dict[str, float] = {}  # exercise -> hidden points not graded here
        self.selected: list[str] = []  # the exercises of the session's items, once collected

    def checks(self, name: str) -> list[tuple[str, bool]]:
        """The checks ``grade`` runs for exercise ``name``: hidden ones next to its key."""
        entry = self.course.setting(name).exercise
        keyed = self.key is not None and (self.key / entry.filename).is_file()
        return [(check, hidden) for check, hidden in entry.checks if keyed or not hidden]

    def verdict(self, name: str, check: str) -> Verdict:
        """The check's verdict; grades the exercise on first use, once per session."""
        if name not in self.results and name not in self.failures:
            # With hidden checks, every selected exercise at once: no visible phase after a
            # hidden one. Without, one exercise at a time (``-x`` grades no more than it runs).
            names = [name] if self.key is None else [
                n for n in dict.fromkeys([*self.selected, name])
                if n not in self.results and n not in self.failures]
            self._grade(names)
        if name in self.failures:
            return Verdict("failed", f"Not graded: {self.failures[name]}")
        result = self.results[name]
        found = verdicts(result)
        if check in found:
            return found[check]
        return Verdict("failed", f"Not graded: {result.error or 'the grader ran no such check'}")

    def _grade(self, names: list[str]) -> None:
        from ...core.course import DEFAULT_KEY, CourseError, load, number
        from ...core.run import GradingRun
        from ...core.submission import BadSubmission

        try:
            with warnings.catch_warnings():
                warnings.resetwarnings()
                for category in IGNORED_BY_DEFAULT:
                    warnings.simplefilter("ignore", category)
                self.grading = self.grading or GradingRun(load(), DEFAULT_KEY)
                graded = self.grading.grade(self.folder, exercises=names, lanes=1)
        except (BadSubmission, CourseError, ValueError) as error:
            self.failures.update(dict.fromkeys(names, str(error)))
            return
        for name in names:  # what the hidden checks not graded here add, as grade counts it
            result = self.results[name] = graded.results[name]
            self.skipped[name] = number(self.grading.course.points(name) - result.max_score)

    def summary(self) -> str:
        """The score table of the exercises graded, as ``make grade`` prints it."""
        from ...core.course import number
        from ...core.results import SubmissionResult
        from ..outputs import report

        order = self.course.names()
        results = {n: self.results[n] for n in sorted(self.results, key=order.index)}
        skipped = {track: number(sum(points for name, points in self.skipped.items()
                                     if self.course.track(name) == track))
                   for track in ("core", "bonus")}
        result = SubmissionResult(str(self.folder), results, self.key is not None,
                                  skipped["core"], skipped["bonus"])
        return report.summary(result)


ROOT = pytest.StashKey[Path]()
KIT = pytest.StashKey[Kit]()


def _kit(config: pytest.Config) -> Kit | None:
    """The session's Kit, made when the first exercise file is collected (a run that collects
    none, such as the kit's own tests, never loads the course)."""
    if KIT not in config.stash and ROOT in config.stash:
        from ...core.course import CourseError

        try:
            config.stash[KIT] = Kit(config.stash[ROOT])
        except CourseError as error:  # the course file's one line, no traceback
            raise pytest.Collector.CollectError(str(error)) from None
    return config.stash.get(KIT, None)


# -- the hooks -------------------------------------------------------------------------------------
def pytest_configure(config: pytest.Config) -> None:
    root = Path(config.rootpath).resolve()
    if root != KIT_ROOT or not (root / "exercises").is_dir():
        return
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    config.stash[ROOT] = root


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    collected = yield
    root = parent.config.stash.get(ROOT, None)
    if root is None or file_path.parent != root / "exercises" or file_path.suffix != ".py":
        return collected
    kit = _kit(parent.config)
    if kit is None or file_path.stem not in kit.course.names():
        return collected
    # A file named on the command line is a test module to pytest's Python plugin: an exercise
    # file is the kit's, never imported here.
    kept = [c for c in collected if not isinstance(c, pytest.Module)]
    return [*kept, ExerciseFile.from_parent(parent, path=file_path)]


@pytest.hookimpl(tryfirst=True)  # before --ff, --lf and -m reorder or deselect
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    """The checks in the course's order (softmax before attention), as ``make grade`` lists
    them; other tests keep their places."""
    kit = config.stash.get(KIT, None)
    if kit is None:
        return
    order = kit.course.names()
    slots = [i for i, item in enumerate(items) if isinstance(item, CheckItem)]
    ours = sorted((items[i] for i in slots), key=lambda item: order.index(item.exercise))
    for i, item in zip(slots, ours):
        items[i] = item


def pytest_collection_finish(session: pytest.Session) -> None:
    """The exercises of the items left once ``-m``, ``-k`` and ``--lf`` have selected."""
    kit = session.config.stash.get(KIT, None)
    if kit is not None:
        kit.selected = list(dict.fromkeys(item.exercise for item in session.items
                                          if isinstance(item, CheckItem)))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    kit = config.stash.get(KIT, None)
    if kit is None or not (kit.results or kit.failures):
        return
    terminalreporter.write_sep("=", "attention-kit: your points, as make grade counts them")
    for line in kit.summary().splitlines():
        terminalreporter.write_line(line)
    for name, why in kit.failures.items():
        terminalreporter.write_line(f"{name}: not graded: {why}")


# -- the collected nodes ---------------------------------------------------------------------------
class CheckFailure(Exception):
    """A check that did not get full points; its message is the report's text for it."""


class ExerciseFile(pytest.File):
    """``exercises/<exercise>.py``: one item per check ``grade`` runs on it."""

    def collect(self):
        kit = _kit(self.config)
        assert kit is not None
        name = self.path.stem
        track = kit.course.track(name)
        for check, hidden in kit.checks(name):
            yield CheckItem.from_parent(self, name=check, exercise=name, track=track,
                                        hidden=hidden)


class CheckItem(pytest.Item):
    """One check of one exercise; its verdict comes from the exercise's one grading."""

    def __init__(self, *, exercise: str, track: str, hidden: bool, **kwargs: Any):
        super().__init__(**kwargs)
        self.exercise = exercise
        self.hidden = hidden
        self.add_marker(track)
        self.add_marker("hidden" if hidden else "visible")

    def runtest(self) -> None:
        kit = _kit(self.config)
        assert kit is not None
        verdict = kit.verdict(self.exercise, self.name)
        if verdict.outcome == "not implemented":
            pytest.xfail(verdict.text)
        if verdict.outcome != "passed":
            raise CheckFailure(verdict.text)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None):
        # The report's text alone: a traceback would only show the plugin's and pytest's frames.
        if isinstance(excinfo.value, (CheckFailure, pytest.xfail.Exception)):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.exercise}: {self.name}"
