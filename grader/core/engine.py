"""Grading a submission: exercise by exercise, check by check, each exercise in its own worker.

The grading process only generates inputs, sends them, and compares what comes back. Each
exercise gets a fresh worker; a missing file, an import error, a crash or a hang costs that
exercise alone.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from hypothesis.errors import Flaky

from ..sandbox import cgroups, readers, zygote_client
from ..sandbox.errors import CallTimedOut, StudentError, WorkerLost
from ..sandbox.isolation import Limits, Sandbox
from . import assertions, one_pass, phases
from . import view as views
from .answer_key import AnswerKey
from .course import DEFAULT_KEY, Course, course_secret, load, number
from .diagnose import diagnose, hint_checks, note_misconceptions
from .exercise import Check, Context, Exercise
from .results import CheckResult, ExerciseResult, SubmissionResult  # noqa: F401  (re-exported)
from .student import NotImplementedYet, Student
from .submission import (  # noqa: F401  (BadSubmission, the limits and the copy: re-exported)
    MAX_DEPTH,
    MAX_ENTRIES,
    MAX_PATH,
    MAX_SUBMISSION_BYTES,
    BadSubmission,
    copy_submission,
    protect_key,
)
from .vacuous import MISFIT_LINE, Judge, Kept

# Small tensors gain nothing from threads, and a forked worker must not inherit a busy pool.
torch.set_num_threads(1)
with contextlib.suppress(RuntimeError):
    torch.set_num_interop_threads(1)


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


# What every hidden check says when the hidden phase could not finish, whatever the cause
# (the code exited, hung, crashed, ran past a limit or out of memory, or would not load
# again): no text of the student's code from a hidden call (exit or exception messages,
# output) reaches a report, so a submission cannot print the hidden inputs into its own
# feedback, and one sentence for every cause tells nothing of what stopped it.
HIDDEN_LOST = "the worker stopped during a hidden check"
BUILTIN_ERRORS = frozenset(
    "ValueError TypeError IndexError KeyError ZeroDivisionError ArithmeticError OverflowError "
    "FloatingPointError AssertionError NotImplementedError RuntimeError AttributeError "
    "LookupError RecursionError BadReturn AxisError".split())


def _raised(error: StudentError, hidden: bool) -> str:
    """What a check says of ``error``. An answer the kit could not use (``BadReturn``: what
    softmax returned is a NoneType, a module whose weights do not fit the example's) is no
    exception of the student's code, so it is not said to be one: "your code raised BadReturn"
    was not true. A hidden check names no more than a built-in exception's type."""
    if error.info.get("bad_return"):
        if hidden:
            return "what your code returned could not be used"
        message = str(error.info.get("message") or "")
        if MISFIT_LINE.fullmatch(message):
            return f"this example's weights could not be loaded into the module: {message}"
        return "what your code returned could not be used" + f": {message}" * bool(message)
    if hidden:
        kind = error.type if error.type in BUILTIN_ERRORS else "an exception"
        return f"your code raised {kind}"
    return f"your code raised {error.describe()}"


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
        result.feedback = _failure_text(check, ctx, _raised(error, check.hidden))
        return result
    except Flaky:
        result.feedback = _failure_text(
            check, ctx, "your code gave different results for the same input"
        )
        return result
    except CallTimedOut as error:  # the next call gets a fresh worker
        if check.hidden:  # it ends the hidden phase, as any other lost worker does
            raise
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
        # Only Hypothesis's draw was shrunk: an example the check wrote is shown as it is.
        label = ("Failing input (a fixed case)" if ctx.fixed else
                 "Smallest failing input" if ctx.drawn else "Failing input")
        lines.append(f"{label}: {shown}")
    if failure is not None and failure.expected is not None and failure.got is not None:
        expected, got = assertions.fmt_pair(failure.expected, failure.got, failure.off)
        lines += [f"Expected: {expected}", f"Got:      {got}"]
    return "\n".join(lines)


# -- one exercise -----------------------------------------------------------------------------
def visible_phase(
    folder: Path,
    exercise: Exercise,
    *,
    course: Course,
    key: Path | None,
    include_hidden: bool,
    limits: Limits,
    devices: tuple[str, ...],
    secret: str = "",
    planned: dict[str, list[bytes]] | None = None,
) -> phases.Seen:
    """Grade the visible part of one exercise of the copied submission in ``folder``: the
    source rule on its files, then its visible checks, informative calls and diagnosis in a
    worker that sees only the files that keep the rule. The key's files of the other
    exercises answer for the student's where theirs are missing (``Student``'s stand-ins).
    Returns the result and, where the answer ``key`` has the exercise's file, the plan of its
    hidden phase (``hidden_phase``), which ``grader.core.phases`` runs once every exercise's
    visible phase is done.

    The visible verdicts are final here: their scores, their text, the diagnosis and the
    exercise's error are settled in this worker, and nothing the hidden one does (fail, exit,
    hang, crash, run out of memory) changes them. A hidden phase that cannot finish costs the
    hidden checks alone, each with the one sentence ``HIDDEN_LOST``."""
    points = course.check_points(exercise)
    compared = key is not None and (key / exercise.filename).is_file()  # its hidden checks
    checks = [c for c in exercise.checks if not c.hidden or (include_hidden and compared)]
    visible = [c for c in checks if not c.hidden]
    hidden = [c for c in checks if c.hidden]
    result = ExerciseResult(exercise.name, number(sum(points[c.name] for c in checks)),
                            course.track(exercise.name))
    if not (folder / exercise.filename).is_file():
        result.error = f"{exercise.filename} was not found in the submission"
        result.checks = [_zero(c, points[c.name]) for c in checks]
        return phases.Seen(result)
    view = folder.parent / "views" / exercise.name
    broken, limits = build_view(folder, view, exercise, limits)
    if broken:
        result.error = broken
        result.checks = [_zero(c, points[c.name], result.error) for c in checks]
        return phases.Seen(result)
    found: list[str] = []
    evidence: dict[str, list[tuple]] = {}  # a failing check -> the calls of its shown example
    probed: dict[str, tuple] = {}  # a misconception -> the probe's call that showed it
    judge = Judge(exercise)  # what each check's calls show of their input
    framework = exercise.framework
    try:
        with Sandbox(view, exercise.name, limits=limits, framework=framework) as sandbox:
            try:
                student = _loaded(sandbox, exercise, key)
                if planned:  # the planned calls, answered in one pass
                    one_pass.answer_in_one_pass(student, planned, [c.name for c in visible])
                ctx = Context(student, None, devices)
                student._calls = ctx.calls
                for check in visible:
                    result.checks.append(_run_noting_calls(check, ctx, course, points, secret,
                                                           judge))
                    evidence[check.name] = list(ctx.calls)
                if not all(c.passed for c in result.checks):
                    found = diagnose(exercise, student, probed)  # probes are visible calls
            finally:
                result.output = _printed(sandbox)
    except (_LoadFailed, WorkerLost) as error:
        result.error = getattr(error, "reason", None) or str(error)
        done = {c.name for c in result.checks}
        result.checks = [_zero_result(c, result.error) for c in result.checks] + [
            _zero(c, points[c.name], result.error) for c in checks if c.name not in done]
        return phases.Seen(result)
    note_misconceptions(result, found, hints=course.hints, exercise=exercise,
                        evidence=evidence, probed=probed)
    judge.withhold(result.checks)
    # The visible verdicts are final: the hidden phase only adds the hidden checks' own.
    if not hidden:
        return phases.Seen(result)
    return phases.Seen(result, phases.Plan.of(
        [c.name for c in hidden], limits, found=found, uses=judge.uses(),
        failing=not all(c.passed for c in result.checks)))


def hidden_phase(folder: Path, exercise: Exercise, plan: phases.Plan, *, course: Course,
                 key: Path, devices: tuple[str, ...], secret: str = "",
                 planned: dict[str, list[bytes]] | None = None) -> phases.Added:
    """The hidden checks' results (``plan.checks``, compared with the answer ``key``'s file of
    the exercise, run here), in a worker of their own that sees the files the visible one saw,
    and what it printed (for the instructor). Hints come from the visible diagnosis
    (``plan.found``); where the visible checks all passed (``plan.failing`` False) and a hidden
    one failed, from probes run here, after the hidden calls, so they go on the hidden checks
    alone (shown when grades are published), never on the exercise's list. A worker lost on
    the way costs every hidden check, each with ``HIDDEN_LOST``; why it stopped goes to the
    instructor's output only. Each is judged on its own calls, or, where those cannot tell, on
    what the visible checks' calls showed (``plan.uses``)."""
    view = folder.parent / "views" / exercise.name
    hidden = [c for c in exercise.checks if c.name in plan.checks]
    points = course.check_points(exercise)
    limits, found = plan.exercise_limits(), plan.found
    judge = Judge(exercise, uses=plan.uses)  # the visible checks' reading, where one does not tell
    results: list[CheckResult] = []
    evidence: dict[str, list[tuple]] = {}
    probed: dict[str, tuple] = {}
    printed = ""
    try:
        with Sandbox(view, exercise.name, limits=limits, framework=exercise.framework) as sandbox:
            try:
                student = _loaded(sandbox, exercise, key)
                if planned:
                    one_pass.answer_in_one_pass(student, planned, [c.name for c in hidden])
                ctx = Context(student, AnswerKey(key, exercise), devices)
                student._calls = ctx.calls
                for check in hidden:
                    results.append(_run_noting_calls(check, ctx, course, points, secret, judge))
                    evidence[check.name] = list(ctx.calls)
                if not found and not plan.failing and not all(c.passed for c in results):
                    found = diagnose(exercise, student, probed)  # only a hidden one failed
            finally:
                printed = _printed(sandbox)
    except (_LoadFailed, WorkerLost) as error:
        why = getattr(error, "reason", None) or str(error)
        printed += ("\n" if printed else "") + f"[the hidden checks' worker stopped: {why}]"
        return phases.Added([_zero(c, points[c.name], HIDDEN_LOST) for c in hidden], printed)
    hint_checks(results, found, hints=course.hints, exercise=exercise, evidence=evidence,
                probed=probed)
    judge.withhold(results)
    return phases.Added(results, printed)


def _run_noting_calls(check: Check, ctx: Context, course: Course, points: dict[str, float],
                      secret: str, judge: Judge) -> CheckResult:
    """``run_check``, noting for ``judge`` what the check called of the student's code."""
    student = ctx.student
    student.names_called.clear()
    student.judged_calls = Kept()
    try:
        result = run_check(check, ctx, course, points[check.name], secret)
    finally:
        calls, student.judged_calls = student.judged_calls, None
    judge.note(check.name, calls, student.names_called, passed=result.passed,
               hidden=check.hidden)
    return result


def _printed(sandbox: Sandbox) -> str:
    """What the worker printed, its files named as the student knows them: a warning or a
    traceback names the file in the worker's view (``sandbox.folder``, resolved as the worker
    sees it), a temporary folder of this run's, which would make the same submission's output
    differ from one run to the next."""
    return sandbox.output().replace(f"{sandbox.folder}{os.sep}", "")


def _loaded(sandbox: Sandbox, exercise: Exercise, key: Path | None) -> Student:
    """The student proxy of ``sandbox`` with the exercise's file loaded (the ``key``'s files
    standing in for the other exercises' that the submission lacks)."""
    student = Student(sandbox, exercise, key_folder=key)
    try:
        loaded = student.load()
    except StudentError as error:
        raise _LoadFailed(
            f"{exercise.filename} could not be imported: {error.describe()}") from None
    if loaded["missing"]:
        raise _LoadFailed(f"{exercise.filename} does not define {', '.join(loaded['missing'])}")
    return student


def build_view(folder: Path, view: Path, exercise: Exercise,
               limits: Limits = Limits()) -> tuple[str | None, Limits]:
    """``grader.core.view.build``: the exercise's files read (never here: in the reader,
    under ``limits``) and those that keep its rule put in ``view``; why it cannot be graded,
    or None, and ``limits`` less the seconds the reading took."""
    return views.build(folder, view, exercise, limits, judge=_verdict)


def _verdict(verdict: str | None) -> str | None:
    """The source rule's verdict on one file, as the reader found it: the one place the kit's
    tests and bench switch the rule off (every file passes)."""
    return verdict


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
    progress: Callable[[ExerciseResult], None] | None = None,
    visible: Callable[[SubmissionResult], None] | None = None,
    plan: bool = True,
) -> SubmissionResult:
    """Grade the folder ``path``: the course's enabled exercises (or ``exercises``), core ones
    always, bonus ones when their file is there. The workers see the interpreter and their
    copy of this submission, nothing else (``grader.sandbox.mounts.private_view``). ``jobs``
    exercises are graded side by side (``grader.core.lanes``), with the same results.

    Every exercise's visible phase runs before any hidden phase (``grader.core.phases``).
    ``visible`` is given the submission's visible verdicts, final, before the first hidden
    phase begins (each hidden check still to run reads ``phases.NOT_YET``); ``progress`` is
    given each exercise's result once it is graded, in no set order. ``plan``: make the
    course's plan (``grader.core.one_pass``) where it is not known yet; without, only a plan
    already made or read is used."""
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
    chosen = {e.name: e for e in course.exercises() if e.name in names}
    # The plan: each check's questions, as the key's answers make them (``one_pass``).
    plans = one_pass.plan_for(course, key, secret, devices, list(chosen.values()),
                              make=plan) if key is not None else {}
    with tempfile.TemporaryDirectory(prefix="attention-kit-") as tmp:
        os.chmod(tmp, 0o755)  # read-only to a worker without namespaces; others see nothing
        copy = Path(tmp) / "submission"
        copy.mkdir()
        copy_submission(source, copy, seconds=limits.timeout)
        readers.start()  # before the lanes fork: one reader for them all

        def seen(name: str) -> phases.Seen:
            exercise = chosen[name]
            track = course.track(name)
            if track == "bonus" and not (copy / exercise.filename).is_file():
                return phases.Seen(ExerciseResult(name, course.points(name), track,
                                                  attempted=False))
            return visible_phase(copy, exercise, course=course, key=key,
                                 include_hidden=include_hidden, limits=limits,
                                 devices=devices, secret=secret, planned=plans.get(name))

        def added(name: str, plan: phases.Plan) -> phases.Added:
            assert key is not None  # a plan is made only where the key has the exercise
            return hidden_phase(copy, chosen[name], plan, course=course, key=key,
                                devices=devices, secret=secret, planned=plans.get(name))

        def pending(name: str, check: str) -> CheckResult:
            found = next(c for c in chosen[name].checks if c.name == check)
            return _zero(found, course.check_points(chosen[name])[check], phases.NOT_YET)

        # An exercise without its file costs nothing to grade: only the others get a lane.
        framework = {name: e.framework for name, e in chosen.items()}
        results = phases.graded(
            list(chosen), seen, added, jobs,
            working=[name for name, e in chosen.items() if (copy / e.filename).is_file()],
            ready=lambda name: zygote_client.ready(framework[name]),
            finished=lambda name, result: progress and progress(result),
            written=lambda shown: visible and visible(_submission(source, shown, course, key)),
            pending=pending if visible else None)
    cgroups.settle()  # the workers' groups that were left for later
    return _submission(source, results, course, key)


def _submission(source: Path, results: dict[str, ExerciseResult], course: Course,
                key: Path | None) -> SubmissionResult:
    """The submission's record of its exercises' ``results``."""
    for result in results.values():
        if result.not_implemented and result.error is None:
            result.attempted = False  # an untouched stub
    skipped = {"core": 0.0, "bonus": 0.0}  # the points the hidden checks would have added
    for name, result in results.items():
        skipped[result.track] += course.points(name) - result.max_score
    return SubmissionResult(str(source), results, key is not None, number(skipped["core"]),
                            number(skipped["bonus"]), cgroups.missing_limits())
