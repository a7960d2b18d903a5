"""Drawing a property's examples once, and replaying them on every later run.

A check's examples depend on its seed (its name, and the course secret for a hidden one), the
number of examples and its strategies, nothing else: Hypothesis, derandomized, draws the same
ones on every run, for as long as every one passes. So the first run of a check that passes
records them: each example's arguments, and the values its body drew from ``st.data()`` in the
order drawn. Every later run of the check in this process, or in a process forked after it (a
batch grades the answer key once before it forks its graders), calls the check's body on those
arguments directly, inside the same seeded random state as Hypothesis gives an example, and
draws nothing.

A replayed example that fails hands the whole check over to Hypothesis, which runs it from its
first example as if nothing had been replayed: it meets the same failure, shrinks it and
reports the smallest failing input, so what the student is told is what they would have been
told without the replay. The same goes for a body that asks for a draw the recording does not
hold (``Mismatch``). An exception that Hypothesis itself would not catch (the worker was lost,
the function is not implemented yet) ends the check at once, as it would under Hypothesis.

Nothing is recorded from a run in which an example did not complete (an assumption was not
met, a draw overran), since such a run cannot be replayed example for example.

The recordings leave this process (kept on disk for the next ``grader grade``, handed to a
batch's other graders) through ``grader.core.replay_store``, split from this module.
"""

from __future__ import annotations

import copy
import hashlib
import pickle
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from . import internals
from .internals import deterministic_PRNG, reseed

# What Hypothesis counts as a failing example (``hypothesis.core.failure_exceptions_to_catch``,
# less pytest's own): anything else stops a check at once.
FAILURES = (Exception, SystemExit, GeneratorExit)


class Mismatch(BaseException):
    """The replayed body asked for a draw the recording does not hold. A BaseException, so no
    check's ``except Exception`` can take it for the student's error."""


@dataclass(frozen=True)
class Example:
    kwargs: dict[str, Any]  # the arguments; a data object's entry is its draws
    data: frozenset[str]  # which of them were data objects


_RECORDED: dict[tuple, tuple[Example, ...]] = {}
_SAVED = [0]  # how many recordings the cache file held or was written with


def is_data(value: Any) -> bool:
    """Whether ``value`` is a data object (``st.data()``: Hypothesis's, or a replay's)."""
    return type(value).__name__ == "DataObject"


def _describe(strategy: Any) -> str:
    return repr(strategy)


class DataObject:
    """Stands for ``st.data()`` in a replay, giving back the recorded draws in order. Named like
    Hypothesis's own, so the check's recorder shows its labelled draws."""

    def __init__(self, draws: list[tuple[Any, str, Any]]):
        self._draws = draws
        self.taken = 0

    def draw(self, strategy: Any, label: Any = None) -> Any:
        if self.taken >= len(self._draws):
            raise Mismatch
        want_label, want_strategy, value = self._draws[self.taken]
        if label != want_label or _describe(strategy) != want_strategy:
            raise Mismatch
        self.taken += 1
        return copy.deepcopy(value)

    @property
    def done(self) -> bool:
        return self.taken == len(self._draws)


def replayed(key: tuple, inner: Callable[..., None], ctx: Any) -> bool | None:
    """Run the recorded examples of ``key`` through ``inner`` (the check's Hypothesis inner
    test). True: every one passed, and the check passed. False: an example failed (the check
    must run under Hypothesis, and fail there too: ``ctx.example`` is the one that failed).
    None: there is no recording, or the body wanted another draw; the check runs under
    Hypothesis as if nothing had been recorded."""
    examples = _RECORDED.get(key)
    if examples is None:
        return None
    with deterministic_PRNG():  # each example seeded as Hypothesis seeds it (reseed)
        for index, example in enumerate(examples):
            data, kwargs = _arguments(example)
            if index:
                reseed()
            try:
                as_run(inner, ctx, kwargs)
            except Mismatch:
                return None
            except FAILURES:
                return False
            if not all(d.done for d in data.values()):
                return None
    return True


@contextmanager
def recording(key: tuple, hypothesis: Any) -> Iterator[None]:
    """Record the examples the check whose Hypothesis handle is ``hypothesis`` runs inside the
    block: kept for ``key`` if the block ends normally (the check passed) and every example
    completed; kept as a failing run (``followed``) if the block ends with the exception of
    the last example run, every step's outcome known."""
    inner = hypothesis.inner_test
    steps: list[tuple[Example, tuple | None, str | None]] = []
    last: list[BaseException | None] = [None]

    def recorder(ctx: Any, **kwargs: Any) -> None:
        record: dict[str, Any] = {}
        for name, value in kwargs.items():
            if is_data(value):
                record[name] = _recording_draws(value)
            else:
                record[name] = copy.deepcopy(value)
        example = Example(record, frozenset(n for n, v in kwargs.items() if is_data(v)))
        try:
            inner(ctx, **kwargs)
        except BaseException as error:
            steps.append((example, outcome(error), choices()))
            last[0] = error
            raise
        steps.append((example, PASSED, choices()))
        last[0] = None

    hypothesis.inner_test = recorder
    try:
        yield
    except BaseException as error:
        if error is last[0]:
            _keep_run(key, steps)
        raise
    finally:
        hypothesis.inner_test = inner
    # Only a run that passed reaches here, and in a run that passed, an example that raised
    # was one Hypothesis discarded (an unmet assumption, an overrun).
    if key not in _RECORDED and steps and all(o == PASSED for _, o, _ in steps):
        _RECORDED[key] = tuple(example for example, _, _ in steps)


# -- a failing check's run, followed -----------------------------------------------------------
# Hypothesis, derandomized, with no deadline and no health checks, decides what to run next
# from the runs so far and nothing else: the choices each made (the examples' values, and the
# draws the check's body asked for, which may depend on the student's replies) and its
# outcome: whether the example passed, was invalid (an unmet assumption), or failed, and then
# with what and where (its ``InterestingOrigin``). So a failing check's run, kept step by step,
# is what Hypothesis will run again for any code that makes the body ask the same draws and
# gives the same outcomes: the same examples in the same order, shrinking to the same smallest
# one, whose exception it raises. Another student's code with the same mistake follows such a
# run to its end without Hypothesis drawing or shrinking anything (2.6 ms per attention
# example drawn, about 340 runs to shrink one failure). Code whose outcome (or draws) differ
# at some step leaves the run there, for another run kept with the same choices and outcomes
# up to that step, or for Hypothesis, which runs the check from its start; the replies given
# so far are served again (``student.Memo``), so the student's code is asked each question
# once, in Hypothesis's order, as if nothing had been followed.
PASSED = ("passed",)
TRANSCRIPT = "run"
MAX_STEPS = 2000  # a run longer than this is not kept (Hypothesis's shrink of one failure:
MAX_RUNS = 8  # ~340 for attention); nor more than this many runs for one check


def outcome(error: BaseException) -> tuple | None:
    """What Hypothesis makes of a run that raised ``error``: ``("invalid",)``, ``("failed",
    where)``, or None for what it does not catch (the check stops at once: the worker was
    lost, an overrun, a skip)."""
    if isinstance(error, internals.UnsatisfiedAssumption):
        return ("invalid",)
    if isinstance(error, (internals.StopTest, internals.FailedHealthCheck,
                          *internals.skip_exceptions_to_reraise())):
        return None
    if not isinstance(error, internals.failure_exceptions_to_catch()):
        return None
    return ("failed", _plain(internals.InterestingOrigin.from_exception(error)))


def choices() -> str | None:
    """A digest of the choices the run of the test in progress has made (each one's type,
    value, constraints and whether it was forced; floats by their bits), or None outside one."""
    try:
        nodes = internals.current_build_context().data.nodes
    except Exception:
        return None
    made = [(n.type, n.value, repr(n.constraints), n.was_forced) for n in nodes]
    return hashlib.sha256(pickle.dumps(made, protocol=5)).hexdigest()[:32]


def _plain(origin: Any) -> tuple:
    """An ``InterestingOrigin`` as plain data (a recording holds nothing else)."""
    kind = origin.exc_type
    return (f"{kind.__module__}.{kind.__qualname__}", origin.filename, origin.lineno,
            _plain(origin.context) if origin.context else (),
            tuple(_plain(member) for member in origin.group_elems))


def _keep_run(key: tuple, steps: list[tuple[Example, tuple | None, str | None]]) -> None:
    if not steps or len(steps) > MAX_STEPS or steps[-1][1] in (None, PASSED, ("invalid",)):
        return
    if any(o is None or c is None for _, o, c in steps) or len(_runs(key)) >= MAX_RUNS:
        return
    path = repr(tuple((o, c) for _, o, c in steps)).encode()
    _RECORDED.setdefault((*key, TRANSCRIPT, hashlib.sha256(path).hexdigest()[:16]),
                         tuple(steps))


def is_recorded(func: Any, seed_text: str, count: int, devices: tuple[str, ...]) -> bool:
    """Whether the examples of the check ``func`` (its seed text, count and devices, as
    ``Check`` keys them) are recorded here."""
    return (func, seed_digest(seed_text), count, tuple(devices)) in _RECORDED


def has_runs(key: tuple) -> bool:
    """Whether a failing run is kept for ``key`` (``followed`` would follow it)."""
    return bool(_runs(key))


def _runs(key: tuple) -> list[tuple[tuple[Example, tuple, str], ...]]:
    """The failing runs kept for ``key``, in the order they were kept."""
    n = len(key)
    return [steps for k, steps in _RECORDED.items()
            if len(k) == n + 2 and k[n] == TRANSCRIPT and k[:n] == key]


def followed(key: tuple, inner: Callable[..., None], ctx: Any,
             enough: Callable[[], bool] = lambda: False) -> BaseException | None:
    """Follow a failing run kept for ``key`` through ``inner`` (the check's inner test), step
    by step, while the code gives each step's outcome: the exception of the last step when it
    reaches the end of one (the check fails with it, as it would under Hypothesis), None when
    there is none to follow, the code leaves them, or ``enough()`` says so after a step (the
    check runs under Hypothesis). An exception Hypothesis does not catch ends the check at
    once, as it would there."""
    runs = _runs(key)
    if not runs:
        return None
    with deterministic_PRNG():  # each step seeded as Hypothesis seeds a run (reseed)
        for index in range(MAX_STEPS):
            if index and enough():
                return None
            example = runs[0][index][0]
            data, kwargs = _arguments(example)
            if index:
                reseed()
            error, got = None, PASSED
            try:
                as_run(inner, ctx, kwargs)
            except Mismatch:
                return None
            except BaseException as raised:
                got = outcome(raised)
                if got is None:
                    raise
                error = raised
            if not all(d.done for d in data.values()):
                return None
            # The code asked for the draws of runs[0] (or it would have left above): the run it
            # is on made these choices, and another kept run is the same so far only if it
            # made them too (two runs can share every outcome and not their choices).
            made = runs[0][index][2]
            runs = [run for run in runs if run[index][1] == got and run[index][2] == made]
            if not runs:
                return None
            if any(len(run) == index + 1 for run in runs):  # Hypothesis's last run: it
                return error  # raises what this one raised (kept runs end failing)
    return None


def _arguments(example: Example) -> tuple[dict[str, DataObject], dict[str, Any]]:
    """A recorded example's data objects, and the keyword arguments to run it with (fresh
    copies: a check may change what it is given)."""
    data = {name: DataObject(example.kwargs[name]) for name in example.data}
    return data, {name: data.get(name) or copy.deepcopy(value)
                  for name, value in example.kwargs.items()}


def as_run(inner: Callable[..., None], ctx: Any, kwargs: dict[str, Any]) -> None:
    """``inner(ctx, **kwargs)`` on the stack Hypothesis gives a run of the test: the recursion
    limit 2000 frames above the frame that sets it (``ensure_free_stackframes``), and the
    check's body as many frames below that one as under Hypothesis (whose proxy calls
    ``recording``'s recorder, which calls ``inner``). A reply nested deep enough to reach the
    limit as it is decoded (a student's tuple in a tuple ..., 500 deep) then reaches it at the
    same depth replayed, followed or drawn."""
    with internals.ensure_free_stackframes():
        _as_recorder(inner, ctx, kwargs)


def _as_recorder(inner: Callable[..., None], ctx: Any, kwargs: dict[str, Any]) -> None:
    inner(ctx, **kwargs)  # the frame ``recording``'s recorder is under Hypothesis


def _recording_draws(data: Any) -> list[tuple[Any, str, Any]]:
    """Make ``data`` (Hypothesis's data object) note each draw; returns the list it fills."""
    draws: list[tuple[Any, str, Any]] = []
    draw = data.draw

    def noting(strategy: Any, label: Any = None) -> Any:
        value = draw(strategy, label=label)
        draws.append((label, _describe(strategy), copy.deepcopy(value)))
        return value

    data.draw = noting
    return draws


def kept(key: tuple, compute: Callable[[], Any]) -> Any:
    """``compute()``, computed once and kept with the recordings under ``key`` (its first item
    the check's function, so the cache keeps it too): a reference answer that takes long to
    compute and depends on nothing but the kit (flash's at T = 2048)."""
    if key not in _RECORDED:
        _RECORDED[key] = compute()
    return _RECORDED[key]


def forget() -> None:
    """Drop every recording (for tests that compare a replayed run with a drawn one)."""
    _RECORDED.clear()
    _SAVED[0] = 0


def seed_digest(seed_text: str) -> str:
    """The seed text as a recording's key holds it (a course secret is never written)."""
    return hashlib.sha256(seed_text.encode()).hexdigest()[:16]
