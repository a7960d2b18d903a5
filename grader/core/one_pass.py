"""A course's plan, and each exercise's calls answered in one pass.

A check's examples are fixed by its seed (its name, and the course secret for a hidden one)
until one fails, and so, for a check whose calls do not depend on the answers, are the
questions it asks the student's code. The **plan** holds, for every check of every exercise
the answer key has, the questions (each as the protocol sends it) that the check asks when the
answers are the key's: computed once, in this process, by the key (``AnswerKey``: no worker,
no student), and kept for the course (``plan_for``; ``grader grade`` keeps it under
``build/plan/`` for the next run, as it keeps the examples).

A student's worker is then sent an exercise's planned questions in one request
(``Sandbox.batch``) and answers them in turn, each call under its own limits as if it came
alone. The checks run as before, from their first example; each ask of a question the pass
answered gets the pass's answer to it, the n-th ask the n-th (``Student.serve``), and any other
ask (an example drawn or shrunk after a failure, a question that depends on a different
answer, a question asked more often than planned) goes to the worker. So each answer a check
reads is the student's code's answer to that very question, asked as often as the check asks
it, and the verdict is the one the check reaches on them: the student gains nothing by
answering a pass otherwise than single calls.

A call past its limit in the pass stops it there: the check that asks it meets the stop (as it
would have alone), and the exercise's later checks are asked in a fresh worker, in one pass
again. A worker lost in the pass (its code exited, crashed, ran out of memory) is lost for the
check that asks that question and every check after it, as it would have been; the checks
before it that ask anything the pass did not get a fresh worker.

The plan only decides what is asked ahead: it never answers for the student, so a plan that
does not fit (another key, a kit changed since) costs speed, never a verdict.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import os
import pickle
import warnings
from pathlib import Path
from typing import Any

from ..sandbox import isolation, protocol
from ..sandbox.errors import StudentError
from ..sandbox.worker import ONE_AT_A_TIME
from . import assertions, internals, replay, replay_store
from .answer_key import AnswerKey
from .course import Course
from .exercise import Context, Exercise
from .student import Student

PLAN = replay_store.CACHE.parent / "plan"

# The plans made or read in this process, by ``_digest``: exercise -> check -> its questions.
_PLANS: dict[str, dict[str, dict[str, list[bytes]]]] = {}


# -- the plan -----------------------------------------------------------------------------------
class _KeyWorker:
    """Stands for a student's worker while the plan is made: the key answers each question in
    this process, and every question is noted as the protocol would send it."""

    def __init__(self, key: AnswerKey) -> None:
        self.key = key
        self.answer: Any = None
        self.questions: list[bytes] = []

    def request(self, op: str, **kwargs: Any) -> Any:
        self.questions.append(protocol.encode({"op": op, "kwargs": kwargs}))
        try:
            # A warning is printed in a worker, never raised (whoever set this process's
            # filters: pytest makes them errors): so here it is not raised either.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if op == "call":
                    value = getattr(self.key, kwargs["func"])(*kwargs["args"],
                                                              **kwargs["kwargs"])
                else:
                    value = getattr(self.key, op)(**kwargs)
        except StudentError:
            raise
        except Exception as error:  # the key's refusal of an input: as a worker reports it
            raise StudentError({"type": type(error).__name__, "message": str(error),
                                "value_error": isinstance(error, ValueError),
                                "not_implemented": False, "bad_return": False,
                                "where": []}) from None
        # As the worker's reply reads once decoded (tuples, dtypes, plain numbers).
        return protocol.decode(protocol.encode({"value": value})[8:])["value"]


class _Unplanned(BaseException):
    """A check that measures a fresh worker (``Student._measured``) asks it alone: the plan
    leaves it out, and stops its run here rather than compute the key's answer for nothing."""


class _KeyStudent(Student):
    """``Student`` over ``_KeyWorker``: the very questions a student's worker is asked."""

    def _measured(self, op: str, **kwargs: Any) -> tuple[Any, int | None]:
        raise _Unplanned(op)


def _plan_exercise(exercise: Exercise, course: Course, key: Path, secret: str,
                   devices: tuple[str, ...]) -> dict[str, list[bytes]]:
    """Each check's questions when the key answers (a check the key does not pass: none)."""
    answers = AnswerKey(key, exercise)
    worker = _KeyWorker(answers)
    student = _KeyStudent(worker, exercise, key_folder=key)  # type: ignore[arg-type]
    planned: dict[str, list[bytes]] = {}
    for check in exercise.checks:
        ctx = Context(student, answers if check.hidden else None, devices)
        student._calls = ctx.calls
        seed_text = secret if check.hidden else ""
        kept = replay.is_recorded(check.func, seed_text, check.examples or course.examples,
                                  devices)
        try:
            with assertions.tolerances(course.tolerances):
                # Where its examples are not kept yet, twice: the first run draws and records
                # them (Hypothesis may try examples it then discards), the second replays them,
                # asking what every later run asks.
                for _ in range(1 if kept else 2):
                    worker.questions = []
                    check.run(ctx, examples=course.examples, seed_text=seed_text)
        except BaseException as error:  # noqa: BLE001  (the check is asked one call at a time)
            if isinstance(error, (KeyboardInterrupt, SystemExit)):
                raise
            continue
        planned[check.name] = worker.questions
    return planned


def _digest(course: Course, key: Path, secret: str, devices: tuple[str, ...]) -> str:
    """What a plan depends on: the kit and its libraries (as the examples' cache is named),
    the key's files, the course (its examples and tolerances), the secret and the devices."""
    digest = hashlib.sha256(_kit().encode())
    for path in sorted(Path(key).glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    digest.update(repr((course.examples, sorted(course.tolerances.items()),
                        replay.seed_digest(secret), devices)).encode())
    return digest.hexdigest()[:32]


@functools.cache
def _kit() -> str:
    """The kit's code and libraries, as the examples' cache is named: read once a process
    (every grade asks, and the code does not change under a running process)."""
    return replay_store.cache_file().stem


def plan_for(course: Course, key: Path, secret: str, devices: tuple[str, ...],
             exercises: list[Exercise], *, make: bool = True
             ) -> dict[str, dict[str, list[bytes]]]:
    """The course's plan for ``exercises`` (those the ``key`` has), made where it is not yet
    known in this process (with ``make``: making it costs about what grading the key does,
    so a run that grades one submission and keeps nothing, Gradescope's, only reads it)."""
    plans = _PLANS.setdefault(_digest(course, key, secret, devices), {})
    for exercise in exercises if make else ():
        if exercise.name not in plans and (key / exercise.filename).is_file():
            plans[exercise.name] = _plan_exercise(exercise, course, key, secret, devices)
    return plans


def save(course: Course, key: Path, secret: str, devices: tuple[str, ...]) -> None:
    """Keep this process's plan for the next ``grader grade`` (``build/plan/``, the grading
    user's own file; nothing where it cannot be written)."""
    name = _digest(course, key, secret, devices)
    plans = _PLANS.get(name)
    if not plans:
        return
    with contextlib.suppress(OSError, pickle.PicklingError):
        path = PLAN / f"{name}.pickle"
        with contextlib.suppress(OSError):
            if path.stat().st_uid == os.geteuid() and path.stat().st_size and set(
                    _read(path)) >= set(plans):
                return
        replay_store.write_private(path, pickle.dumps(plans, protocol=5))


def load(course: Course, key: Path, secret: str, devices: tuple[str, ...]) -> None:
    """Read the plan a previous ``grader grade`` kept (nothing when there is none, it is not
    the grading user's own, or it cannot be read)."""
    name = _digest(course, key, secret, devices)
    path = PLAN / f"{name}.pickle"
    with contextlib.suppress(OSError, pickle.UnpicklingError, ValueError, TypeError,
                             EOFError, AttributeError, ImportError, IndexError, KeyError):
        if path.stat().st_uid == os.geteuid():
            _PLANS.setdefault(name, {}).update(_read(path))


def _read(path: Path) -> dict[str, dict[str, list[bytes]]]:
    """A plan file, if it is one: exercise -> check -> a list of questions' bytes."""
    plans = replay_store.Unpickler(io.BytesIO(path.read_bytes())).load()
    if not (isinstance(plans, dict) and all(
            isinstance(e, str) and isinstance(checks, dict) and all(
                isinstance(c, str) and isinstance(qs, list)
                and all(isinstance(q, bytes) for q in qs) for c, qs in checks.items())
            for e, checks in plans.items())):
        raise ValueError("not a plan")
    return plans


def forget() -> None:
    """Drop every plan this process holds (for tests)."""
    _PLANS.clear()


# -- one pass -----------------------------------------------------------------------------------
def answer_in_one_pass(student: Student, planned: dict[str, list[bytes]],
                       checks: list[str]) -> dict[bytes, list[tuple]]:
    """Ask the student's worker every planned question of ``checks`` (in the order they run,
    each as often as it is planned) in one pass, and have ``student`` serve the answers;
    returns them (question -> its outcomes, one an ask). Where the pass stops at a call past
    its limit, the checks after that call's own are asked in one pass again, in a fresh
    worker, each up to its first question already stopped (the check meets that stop again
    there, at no cost, and asks nothing after it but what it shrinks); where the worker is
    lost, or the replies kept pass ``BATCH_BYTES`` over all the phase's passes, the rest are
    not asked in a pass."""
    served: dict[bytes, list[tuple]] = {}
    stopped: set[bytes] = set()
    sandbox = student._sandbox
    segments = [planned.get(n) or [] for n in checks]
    first, budget = 0, isolation.BATCH_BYTES  # the replies kept, all passes of the phase
    while first < len(segments) and budget > 0:
        asked, calls = [], []
        for index, questions in enumerate(segments[first:], first):
            for question in questions:
                if question in stopped:
                    break
                call = _call(question)
                if call is not None:
                    asked.append((index, question))
                    calls.append(call)
        if not asked:
            break
        # Replies read with the stack a check's run has (Hypothesis's recursion limit), as a
        # reply asked alone is read: a deeply nested one is read alike.
        with internals.ensure_free_stackframes():
            outcomes = sandbox.batch(calls, budget)
        for (_, question), outcome in zip(asked, outcomes):
            served.setdefault(question, []).append(outcome)
        budget -= sum(len(o[1]) for o in outcomes if o[0] == "frame")
        if len(outcomes) == len(asked) or not outcomes or outcomes[-1][0] != "stopped":
            break
        stopped.add(asked[len(outcomes) - 1][1])
        first = asked[len(outcomes) - 1][0] + 1  # the next check's calls, in a fresh worker
    student.serve(served)
    return served


@functools.lru_cache(maxsize=1 << 14)
def _call(question: bytes) -> dict[str, Any] | None:
    """A planned question as a pass sends it, or None where it is not one (a plan file is
    read as data: what does not decode to a call is not asked). Decoded once a process (and
    once for a batch's graders, forked after the key's grade): a pass only reads it."""
    try:
        call = protocol.decode(question[8:])
    except (protocol.ProtocolError, ValueError, TypeError, OverflowError, RecursionError):
        return None
    if (not isinstance(call, dict) or set(call) != {"op", "kwargs"}
            or not isinstance(call["op"], str) or call["op"] in ONE_AT_A_TIME
            or not isinstance(call["kwargs"], dict)):
        return None
    return call
