"""Grading a submission: exercise by exercise, check by check, each exercise in its own worker.

The grading process only generates inputs, sends them, and compares what comes back. Each
exercise gets a fresh worker; a missing file, an import error, a crash or a hang costs that
exercise alone.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
from hypothesis.errors import Flaky

from ..sandbox import cgroups, zygotes
from ..sandbox.isolation import (
    OUTPUT_CAP,
    TRUNCATED,
    CallTimedOut,
    Limits,
    Sandbox,
    StudentError,
    WorkerLost,
)
from . import assertions, lanes
from .course import KIT_ROOT, Course, course_secret, load, number
from .delegation import Rule, verdict
from .diagnose import diagnose, note_misconceptions
from .exercise import Check, Context, Exercise
from .student import AnswerKey, NotImplementedYet, Student
from .submission import (  # noqa: F401  (BadSubmission, the limits and the copy: re-exported)
    MAX_DEPTH,
    MAX_ENTRIES,
    MAX_PATH,
    MAX_SUBMISSION_BYTES,
    BadSubmission,
    copy_submission,
    protect_key,
)
from .vacuous import verdicts, withhold

# Small tensors gain nothing from threads, and a forked worker must not inherit a busy pool.
torch.set_num_threads(1)
with contextlib.suppress(RuntimeError):
    torch.set_num_interop_threads(1)

DEFAULT_KEY = KIT_ROOT / "solutions"


@dataclass
class CheckResult:
    exercise: str
    name: str
    prop: str
    points: float
    max_points: float
    hidden: bool
    passed: bool
    feedback: str = ""

    @property
    def visibility(self) -> str:
        return "after_published" if self.hidden else "visible"


@dataclass
class ExerciseResult:
    name: str
    max_score: float
    track: str = "core"
    checks: list[CheckResult] = field(default_factory=list)
    error: str | None = None  # why the exercise could not be graded at all
    misconceptions: list[str] = field(default_factory=list)
    output: str = ""  # what the student's code printed: for the instructor only
    # False: the student did not start it: a bonus exercise whose file is not in the
    # submission, or an untouched stub (``not_implemented``: every check met the stub's
    # NotImplementedError). An untouched bonus stub lists no failing check and stays out of the
    # class's pass rates, as a missing file does; a core one still scores 0 on every check.
    attempted: bool = True

    @property
    def score(self) -> float:
        return 0 if self.error else number(sum(c.points for c in self.checks))

    @property
    def not_implemented(self) -> bool:
        return bool(self.checks) and all(
            c.feedback.startswith("not implemented yet") for c in self.checks
        )


@dataclass
class SubmissionResult:
    path: str
    results: dict[str, ExerciseResult]  # every graded exercise, in the course's order
    key_present: bool
    hidden_points_skipped: float = 0  # the core points of the hidden checks not run here
    hidden_bonus_points_skipped: float = 0  # and the bonus track's
    # The kernel's limits this machine could not give the workers (no cgroups): for the
    # instructor's report, empty where every limit held.
    limits_missing: list[str] = field(default_factory=list)

    @property
    def exercises(self) -> dict[str, ExerciseResult]:
        """The core exercises: their points make the score."""
        return {n: e for n, e in self.results.items() if e.track == "core"}

    @property
    def bonus(self) -> dict[str, ExerciseResult]:
        """The bonus track: graded when present, never part of the score."""
        return {n: e for n, e in self.results.items() if e.track == "bonus"}

    @property
    def score(self) -> float:
        return number(sum(e.score for e in self.exercises.values()))

    @property
    def max_score(self) -> float:
        return number(sum(e.max_score for e in self.exercises.values()))

    @property
    def bonus_score(self) -> float:
        return number(sum(e.score for e in self.bonus.values()))

    @property
    def bonus_max_score(self) -> float:
        return number(sum(e.max_score for e in self.bonus.values()))


# -- one check --------------------------------------------------------------------------------
def _inputs(ctx: Context) -> str:
    """The current example's inputs, each under its own name. A NamedTuple case shows its
    fields directly (``lengths [2 1], t 3``), unless one of them is named like another input
    shown: then it reads ``padding (lengths [1], t 1)``, so no two inputs share a name."""
    names: dict[str, int] = {}
    for name, value in ctx.example.items():
        for shown in getattr(value, "_fields", (name,)):
            names[shown] = names.get(shown, 0) + 1
    parts = []
    for name, value in ctx.example.items():
        fields = getattr(value, "_fields", None)
        if fields is None:
            parts.append(f"{name} {assertions.fmt(value)}")
        elif any(names[f] > 1 for f in fields):
            parts.append(f"{name} ({assertions.fmt(value)})")
        else:
            parts.append(assertions.fmt(value))
    return ", ".join(parts)


# What a hidden check says of a worker that stopped during it, whatever the code did: no text
# of the student's code from a hidden call (exit or exception messages, output) reaches a
# report, so a submission cannot print the hidden inputs into its own feedback.
HIDDEN_LOST = "the worker stopped during a hidden check"
BUILTIN_ERRORS = frozenset(
    "ValueError TypeError IndexError KeyError ZeroDivisionError ArithmeticError OverflowError "
    "FloatingPointError AssertionError NotImplementedError RuntimeError AttributeError "
    "LookupError RecursionError BadReturn AxisError".split())


def run_check(check: Check, ctx: Context, course: Course, points: float,
              secret: str = "") -> CheckResult:
    """Run one check worth ``points``; WorkerLost propagates (it ends the exercise). A hidden
    check draws its examples from the course ``secret`` too, and its feedback quotes nothing
    the student's code wrote (an exception is named by its type when that is a built-in one)."""
    result = CheckResult(check.exercise, check.name, check.prop, 0, points, check.hidden, False)
    try:
        with assertions.tolerances(course.tolerances):
            check.run(ctx, examples=course.examples, seed_text=secret if check.hidden else "")
    except NotImplementedYet as error:
        result.feedback = "not implemented yet" if check.hidden else (
            f"not implemented yet ({error})")
        return result
    except assertions.CheckFailed as failure:
        result.feedback = _failure_text(check, ctx, failure.message, failure)
        return result
    except StudentError as error:
        if check.hidden:
            kind = error.type if error.type in BUILTIN_ERRORS else "an exception"
            result.feedback = _failure_text(check, ctx, f"your code raised {kind}")
        else:
            result.feedback = _failure_text(check, ctx, f"your code raised {error.describe()}")
        return result
    except Flaky:
        result.feedback = _failure_text(
            check, ctx, "your code gave different results for the same input"
        )
        return result
    except CallTimedOut as error:  # the next call gets a fresh worker
        result.feedback = _failure_text(check, ctx, error.reason)
        return result
    except WorkerLost:
        raise
    except Exception as error:  # a comparison the student's output broke
        result.feedback = _failure_text(check, ctx, f"could not check the result ({error!r})")
        return result
    result.passed = True
    result.points = points
    return result


def _failure_text(
    check: Check, ctx: Context, message: str, failure: assertions.CheckFailed | None = None
) -> str:
    lines = [f"Property: {check.prop}", f"Failed: {message}"]
    shown = _inputs(ctx)
    if shown:
        lines.append(f"Smallest failing input: {shown}")
    if failure is not None and failure.expected is not None and failure.got is not None:
        expected, got = assertions.fmt_pair(failure.expected, failure.got, failure.off)
        lines += [f"Expected: {expected}", f"Got:      {got}"]
    return "\n".join(lines)


# -- one exercise -----------------------------------------------------------------------------
def grade_exercise(
    folder: Path,
    exercise: Exercise,
    *,
    course: Course,
    key_folder: Path | None,
    include_hidden: bool,
    limits: Limits,
    devices: tuple[str, ...],
    secret: str = "",
    stand_ins: Path | None = None,
) -> ExerciseResult:
    """Grade one exercise of the copied submission in ``folder``: the source rule on its
    files, then its visible checks in a worker that sees only the files that keep the rule,
    then the hidden ones (against the answer key, run here) in a worker of their own, so that
    nothing a hidden call did or saw can reach a visible check's feedback."""
    points = course.check_points(exercise)
    checks = [c for c in exercise.checks
              if not c.hidden or (include_hidden and key_folder is not None)]
    visible = [c for c in checks if not c.hidden]
    hidden = [c for c in checks if c.hidden]
    result = ExerciseResult(exercise.name, number(sum(points[c.name] for c in checks)),
                            course.track(exercise.name))
    if not (folder / exercise.filename).is_file():
        result.error = f"{exercise.filename} was not found in the submission"
        result.checks = [_zero(c, points[c.name]) for c in checks]
        return result
    view = folder.parent / "views" / exercise.name
    broken = build_view(folder, view, exercise)
    if broken:
        result.error = broken
        result.checks = [_zero(c, points[c.name], result.error) for c in checks]
        return result
    found: list[str] = []
    evidence: dict[str, list[tuple]] = {}  # a failing check -> the calls of its shown example
    probed: dict[str, tuple] = {}  # a misconception -> the probe's call that showed it
    calls: dict[str, set[str]] = {}  # check -> the functions and operations it called
    ignored: dict[str, str] = {}  # function or operation -> why it ignores its input
    framework = exercise.framework
    try:
        with Sandbox(view, exercise.name, limits=limits, framework=framework) as sandbox:
            try:
                student = _loaded(sandbox, exercise, stand_ins)
                ctx = Context(student, None, devices)
                student._calls = ctx.calls
                for check in visible:
                    result.checks.append(_recorded(check, ctx, course, points, secret, calls))
                    evidence[check.name] = list(ctx.calls)
                if not all(c.passed for c in result.checks):
                    found = diagnose(exercise, student, probed)  # probes are visible calls
                ignored = verdicts(exercise, student, secret)
            finally:
                result.output = _printed(sandbox)
        if hidden:
            with Sandbox(view, exercise.name, limits=limits, framework=framework) as sandbox:
                try:
                    student = _loaded(sandbox, exercise, stand_ins)
                    ctx = Context(student, AnswerKey(key_folder, exercise), devices)
                    student._calls = ctx.calls
                    for check in hidden:
                        result.checks.append(
                            _recorded(check, ctx, course, points, secret, calls))
                        evidence[check.name] = list(ctx.calls)
                    if not found and not all(c.passed for c in result.checks):
                        found = diagnose(exercise, student, probed)  # only a hidden one failed
                except (_LoadFailed, WorkerLost):
                    raise WorkerLost(HIDDEN_LOST) from None
                finally:
                    result.output = joined_output(result.output, _printed(sandbox))
        if found or not all(c.passed for c in result.checks):
            note_misconceptions(result, found, hints=course.hints, exercise=exercise,
                                evidence=evidence, probed=probed)
        for c in result.checks:
            withhold(c, calls.get(c.name, set()), ignored)
    except (_LoadFailed, WorkerLost) as error:
        result.error = getattr(error, "reason", None) or str(error)
        done = {c.name for c in result.checks}
        result.checks = [_zero(c, points[c.name], result.error) for c in checks
                         if c.name not in done] + [
            _zero_result(c, result.error) for c in result.checks
        ]
        result.checks.sort(key=lambda c: [x.name for x in checks].index(c.name))
    return result


def _recorded(check: Check, ctx: Context, course: Course, points: dict[str, float],
              secret: str, calls: dict[str, set[str]]) -> CheckResult:
    """``run_check``, noting in ``calls`` what the check called of the student's code."""
    ctx.student.names_called.clear()
    result = run_check(check, ctx, course, points[check.name], secret)
    calls[check.name] = set(ctx.student.names_called)
    return result


def _printed(sandbox: Sandbox) -> str:
    """What the worker printed, its files named as the student knows them: a warning or a
    traceback names the file in the worker's view (``sandbox.folder``, resolved as the worker
    sees it), a temporary folder of this run's, which would make the same submission's output
    differ from one run to the next."""
    return sandbox.output().replace(f"{sandbox.folder}{os.sep}", "")


def joined_output(visible: str, hidden: str) -> str:
    """What the two workers of an exercise printed, for the instructor, within one cap."""
    if not hidden or visible.endswith(TRUNCATED):
        return visible
    text = visible + ("\n" if visible else "") + "[during the hidden checks]\n" + hidden
    return text if len(text) <= OUTPUT_CAP else text[:OUTPUT_CAP] + TRUNCATED


def _rebuilt(fields: dict) -> ExerciseResult:
    """An ``ExerciseResult`` from its ``dataclasses.asdict`` fields (a lane's reply)."""
    checks = [CheckResult(**check) for check in fields["checks"]]
    return ExerciseResult(**{**fields, "checks": checks})


def _loaded(sandbox: Sandbox, exercise: Exercise, stand_ins: Path | None) -> Student:
    """The student proxy of ``sandbox`` with the exercise's file loaded."""
    student = Student(sandbox, exercise, key_folder=stand_ins)
    try:
        loaded = student.load()
    except StudentError as error:
        raise _LoadFailed(
            f"{exercise.filename} could not be imported: {error.describe()}") from None
    if loaded["missing"]:
        raise _LoadFailed(f"{exercise.filename} does not define {', '.join(loaded['missing'])}")
    return student


def build_view(folder: Path, view: Path, exercise: Exercise) -> str | None:
    """Fill ``view`` with what the exercise's worker may see of the submission in ``folder``:
    its ``.py`` files (helper packages included) that keep the exercise's source rule, less
    the exercises it may use (proxies stand for them) and those it may not import. Nothing
    else: no data file, no native library, no file that breaks the rule, so nothing the rule
    refuses can run in the worker however it is imported. Returns why the exercise cannot be
    graded (its own file, or a module it imports, breaks the rule), or None."""
    files = sorted(p for p in folder.rglob("*.py") if p.is_file())
    own = frozenset({p.relative_to(folder).parts[0].removesuffix(".py") for p in files}
                    | set(exercise.uses))
    left_out: dict[str, str] = {}
    shutil.rmtree(view, ignore_errors=True)
    view.mkdir(parents=True)
    for path in files:
        relative = path.relative_to(folder)
        top = relative.parts[0].removesuffix(".py")
        if top != exercise.name and (top in exercise.uses or top in exercise.rule.siblings):
            continue
        found = _verdict(path.read_text(errors="replace"), exercise.rule, own)
        if found:
            left_out.setdefault(top, found if relative.parts == (exercise.filename,)
                                else f"{relative}: {found}")
            continue
        target = view / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(path, target)
    for path in [view, *view.rglob("*")]:
        if path.is_dir():
            os.chmod(path, 0o755)
    todo, seen = [exercise.name], set()
    while todo:  # its file, or a module it imports (or one of theirs), was left out: say why
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in left_out:
            return left_out[name]
        source = folder / f"{name}.py"
        if source.is_file() and name not in exercise.uses:
            todo += imported_names(source.read_text(errors="replace"))
    return None


@functools.lru_cache(maxsize=4096)
def _verdict(source: str, rule: Rule, own: frozenset[str]) -> str | None:
    return verdict(source, rule, own_modules=own)


def imported_names(source: str) -> set[str]:
    """The first part of every module ``source`` imports, relative imports included."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom):  # from . import helper
            names.update(a.name for a in node.names)
    return names


class _LoadFailed(Exception):
    pass


def _zero(check: Check, points: float, reason: str = "") -> CheckResult:
    return CheckResult(
        check.exercise, check.name, check.prop, 0, points, check.hidden, False,
        f"Property: {check.prop}\nNot graded: {reason}" if reason else "",
    )


def _zero_result(result: CheckResult, reason: str) -> CheckResult:
    result.points, result.passed = 0, False
    result.feedback = f"Property: {result.prop}\nNot graded: {reason}"
    return result


# -- a submission -----------------------------------------------------------------------------
def available_devices() -> tuple[str, ...]:
    # Ask NVML, not the CUDA driver: a batch forks its graders after this, and a process whose
    # parent initialised the driver cannot use CUDA.
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    return ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)


def grade_submission(
    path: str | os.PathLike[str],
    *,
    course: Course | None = None,
    exercises: tuple[str, ...] | list[str] | None = None,
    include_hidden: bool = True,
    key_folder: str | os.PathLike[str] | None = DEFAULT_KEY,
    limits: Limits = Limits(),
    jobs: int = 1,
) -> SubmissionResult:
    """Grade the folder ``path``: the course's enabled exercises (or ``exercises``), core ones
    always, bonus ones when their file is there. The workers see the interpreter and their
    copy of this submission, nothing else (``grader.sandbox.confine.private_view``). ``jobs``
    exercises are graded side by side (``grader.core.lanes``), with the same results."""
    course = course or load()
    source = Path(path)
    if not source.is_dir():
        raise BadSubmission(f"{source} is not a folder")
    key = Path(key_folder) if key_folder is not None else None
    if key is not None and not all((key / f"{n}.py").is_file() for n in course.names("core")):
        key = None
    if key is not None:
        protect_key(key)
    names = list(exercises or course.names())
    for name in names:
        if name not in course.names():
            raise ValueError(f"unknown or disabled exercise {name!r}")
    devices = available_devices()
    secret = course_secret(key) if key is not None else ""
    chosen = [e for e in course.exercises() if e.name in names]
    with tempfile.TemporaryDirectory(prefix="attention-kit-") as tmp:
        os.chmod(tmp, 0o755)  # read-only to a worker without namespaces; others see nothing
        copy = Path(tmp) / "submission"
        copy.mkdir()
        copy_submission(source, copy, seconds=limits.timeout)

        def grade(name: str) -> ExerciseResult:
            exercise = next(e for e in chosen if e.name == name)
            track = course.track(name)
            if track == "bonus" and not (copy / exercise.filename).is_file():
                return ExerciseResult(name, course.points(name), track, attempted=False)
            own_key = key if key is not None and (key / exercise.filename).is_file() else None
            return grade_exercise(
                copy, exercise, course=course, key_folder=own_key,
                include_hidden=include_hidden, limits=limits, devices=devices, secret=secret,
                stand_ins=key,
            )

        # An exercise without its file costs nothing to grade: only the others get a lane.
        attempted = [e.name for e in chosen if (copy / e.filename).is_file()]
        framework = {e.name: e.framework for e in chosen}
        results = lanes.graded(attempted, grade, jobs, _rebuilt,
                               ready=lambda name: zygotes.ready(framework[name]))
        results = {e.name: results[e.name] if e.name in results else grade(e.name)
                   for e in chosen}
    for result in results.values():
        if result.not_implemented and result.error is None:
            result.attempted = False  # an untouched stub
    cgroups.settle()  # the workers' groups that were left for later
    skipped = {"core": 0.0, "bonus": 0.0}  # the points the hidden checks would have added
    for name, result in results.items():
        skipped[result.track] += course.points(name) - result.max_score
    return SubmissionResult(str(source), results, key is not None, number(skipped["core"]),
                            number(skipped["bonus"]), cgroups.missing_limits())
