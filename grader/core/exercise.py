"""What an exercise is: its declaration, and the checks, probes, operations and reference
functions registered on it, each declared next to its code in the exercise's own module
(``grader/problems/<name>.py``)::

    EX = Exercise("softmax", functions=("softmax",), framework="numpy", track="core", points=15)

    @EX.check(points=2, prop="Every slice along `axis` sums to 1.")
    @given(case=logits_and_axis())
    def test_slices_sum_to_one(ctx, case):
        ...

A check is a function of the ``Context``; it passes by returning and fails by raising
(``CheckFailed`` from ``grader.core.assertions``, or the student's own exception). ``hidden=True``
marks an answer-key comparison: the handout leaves it out and Gradescope shows it after grades
are published. The points given here are the defaults; ``course.toml`` may scale them.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import numbers
import types
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, Verbosity, seed, settings
from hypothesis.errors import Flaky

from ..sandbox.call_limit import SHRINK_STOPS
from ..sandbox.errors import CallTimedOut
from . import replay
from .course import TRACKS
from .delegation import NUMPY_RULE, Rule
from .internals import deterministic_PRNG
from .internals import providers as _providers

FRAMEWORKS = ("numpy", "torch")

# Hypothesis mixes into its draws the literals of every "local" module that happens to be
# imported (grader.batch, grader.gradescope, test files...), so the same check drew different
# examples depending on the route that imported it. Grading draws from its own strategies only:
# the examples depend on the check, its seed and the course, nothing else.
_NO_LOCAL_CONSTANTS = _providers.Constants()
_providers._get_local_constants = lambda: _NO_LOCAL_CONSTANTS
_providers.CONSTANTS_CACHE.cache.clear()

GRADING = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=10,
    print_blob=False,
    report_multiple_bugs=False,
    verbosity=Verbosity.quiet,
    suppress_health_check=list(HealthCheck),
    # No "explain" phase: it replays a failing example many times to annotate it, which the
    # feedback never shows, and costs seconds of the exercise's time budget per failing check.
    phases=[p for p in Phase if p is not Phase.explain],
)


def positive_int(value: Any, name: str, minimum: int) -> int:
    """``value`` as an int, or ValueError unless it is an integer >= ``minimum`` (bools too)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


@dataclass
class Context:
    """What a check sees: the student's functions, the answer key's (or None), devices."""

    student: Any
    key: Any = None
    devices: tuple[str, ...] = ("cpu",)
    example: dict[str, Any] = field(default_factory=dict)  # the inputs of the current example
    # The student's calls during the current example: (function, args, kwargs, reply), the
    # reply being the StudentError when the call raised (``Student`` appends them).
    calls: list[tuple[str, tuple, dict, Any]] = field(default_factory=list)
    fixed: bool = False  # the current example is one of the check's fixed cases, not shrunk
    # The current example is Hypothesis's draw, or made from it: shrunk when it fails. An
    # example a check writes itself (``show``, by default) was never shrunk.
    drawn: bool = False

    def show(self, *, drawn: bool = False, **inputs: Any) -> None:
        """Record the inputs the check is about to call the student's code with (every
        argument of that call, by the contract's names, so the student can paste it back),
        for its feedback; ``drawn``: made from the drawn example, so shrunk with it."""
        self.example = dict(inputs)
        self.drawn = drawn


@dataclass(frozen=True)
class Misconception:
    id: str
    mistake: str  # what the code does
    hint: str  # a nudge toward the fix, in the student's terms


@dataclass(frozen=True)
class Judged:
    """A function or operation (``call``) whose answers must use their input to earn the
    points of the checks that call it: where a check's calls of it show nothing of their input
    next to what ``reference`` answers to the same calls, in the grading process, the check
    passes without its points (``grader.core.vacuous``). A check that calls one of ``covers``
    and cannot tell on its own calls is judged by every check's calls of ``call``."""

    call: str
    label: str  # how the student knows it: "softmax", "MultiHeadAttention's forward"
    covers: tuple[str, ...]
    reference: Callable[..., Any]


@dataclass(frozen=True)
class Check:
    exercise: str
    name: str
    points: int  # the default; the course scales an exercise's checks to its points
    prop: str
    func: Callable[..., None]
    hidden: bool = False
    examples: int = 0  # 0: the course's examples per property
    # The cases every run includes, whatever the seed: a function of a NumPy generator seeded
    # like the check (by the course secret too, for a hidden one) that gives the keyword
    # arguments of each; the structure of each case (shapes, dtypes, mask kinds) is its own,
    # only its values come from the generator. They run after the drawn examples pass.
    cases: Callable[[np.random.Generator], list[dict[str, Any]]] | None = None

    @property
    def visibility(self) -> str:
        return "after_published" if self.hidden else "visible"

    @property
    def is_property(self) -> bool:
        return hasattr(self.func, "hypothesis")

    def run(self, ctx: Context, *, examples: int, seed_text: str = "") -> None:
        """Run the check; a property runs ``examples`` examples (or its own count) from a seed
        fixed by its name (and ``seed_text``, the course secret for hidden checks), then its
        fixed cases."""
        ctx.example = {}
        ctx.calls.clear()
        ctx.fixed = ctx.drawn = False
        if not self.is_property:
            self.func(ctx)
            return
        self._drawn(ctx, examples, seed_text)
        self._fixed(ctx, seed_text)

    def _drawn(self, ctx: Context, examples: int, seed_text: str) -> None:
        count = self.examples or examples
        key = (self.func, replay.seed_digest(seed_text), count, tuple(ctx.devices))
        replayed = replay.replayed(key, self.func.hypothesis.inner_test, ctx)
        if replayed:
            return  # the examples Hypothesis drew before, every one passed
        failed, drawn = dict(ctx.example), ctx.drawn
        memoizing = getattr(ctx.student, "memoizing", None)
        if memoizing is None or not replay.has_runs(key):
            memoizing = contextlib.nullcontext
        # Where a failing run is followed, the check may then run from its start again, under
        # Hypothesis: what the student's code answered is served again, not asked again.
        with memoizing() as memo:
            ctx.example = {}
            ctx.calls.clear()
            error = replay.followed(key, self.func.hypothesis.inner_test, ctx,
                                    enough=lambda: memo is not None and memo.full)
            if error is not None:
                raise error  # where Hypothesis would have ended, with the same exception
            if memo is not None:
                memo.restart()
            ctx.example = {}
            ctx.calls.clear()
            # Set on every run, not once: the course decides the count.
            self.func._hypothesis_internal_use_settings = settings(  # type: ignore[attr-defined]
                GRADING, max_examples=count)
            seed(zlib.crc32(f"{seed_text}{self.exercise}.{self.name}".encode()))(self.func)
            with replay.recording(key, self.func.hypothesis):
                self.func(ctx)
        if replayed is False:  # the same examples failed a moment ago, in the replay
            ctx.example, ctx.drawn = failed, drawn
            raise Flaky("the same input failed in the replay and passed when drawn again")

    def _fixed(self, ctx: Context, seed_text: str) -> None:
        """The fixed cases, each run as Hypothesis runs an example (in its seeded random state,
        under its recursion limit); the first that fails ends the check with its exception,
        and ``ctx`` shows it as given (``Context.fixed``: no shrinking made it smaller)."""
        for kwargs in self.fixed_cases(seed_text):
            ctx.fixed = True
            with deterministic_PRNG():
                replay.as_run(self.func.hypothesis.inner_test, ctx, kwargs)
        ctx.fixed = False

    def fixed_cases(self, seed_text: str = "") -> list[dict[str, Any]]:
        """The keyword arguments of the check's fixed cases (``cases``), their values drawn
        from its name and ``seed_text``."""
        if self.cases is None:
            return []
        digest = hashlib.sha256(f"{seed_text}{self.exercise}.{self.name}".encode()).digest()
        return self.cases(np.random.default_rng(int.from_bytes(digest, "big")))


def _record_draws(data: Any, ctx: Context) -> None:
    """Make labelled interactive draws (``data.draw(..., label=...)``) part of the shown example."""
    draw = data.draw

    def recording_draw(strategy: Any, label: Any = None) -> Any:
        value = draw(strategy, label=label)
        if label is not None:  # unlabelled draws are parts of a labelled input
            ctx.example[str(label)] = value
        return value

    data.draw = recording_draw


class HungCall(CallTimedOut, Exception):
    """A call of the current example ran past its own limit (``CallTimedOut``), raised where
    Hypothesis takes it for a failure like any other and shrinks its input, each smaller input
    that still runs past the limit costing the limit again. The exercise's ``SHRINK_STOPS``
    (``Student.shrinks_stop``) bound that; past them, the ``CallTimedOut`` itself ends the
    check at once, on the smallest input that ran past so far. Either way the check fails as
    a stopped call does (``engine.run_check``)."""


def _recording_examples(func: Callable) -> Callable:
    """``func`` (a Hypothesis test) made to record each example's inputs in ``ctx.example``."""
    hypothesis = getattr(func, "hypothesis", None)
    if hypothesis is None:
        return func
    inner = hypothesis.inner_test

    def recorded(ctx: Context, **kwargs: Any) -> None:
        # Hypothesis replays the smallest failure last, so what is recorded here at the end is
        # the counterexample to show.
        ctx.example = {k: v for k, v in kwargs.items() if not replay.is_data(v)}
        ctx.drawn = True
        ctx.calls.clear()
        for value in kwargs.values():
            if replay.is_data(value):
                _record_draws(value, ctx)
        try:
            inner(ctx, **kwargs)
            return
        except HungCall:
            raise
        except CallTimedOut as stopped:
            shrinks = getattr(ctx.student, "shrinks_stop", None)
            if shrinks is None or not shrinks(stopped):
                raise
            reason = stopped.reason
        # Raised here, out of the handler, so that it carries no context: Hypothesis tells one
        # failure from another by where it was raised and the context it carries, and a stopped
        # call is one failure whether the worker or the Student stopped it.
        raise HungCall(reason)

    hypothesis.inner_test = recorded
    return func


def definition_source(obj: Callable) -> str:
    """The source of a function or class from its ``def``/``class`` line (decorators dropped)."""
    lines = inspect.getsource(obj).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(("def ", "class ")))
    return "\n".join(lines[start:]) + "\n"


class Exercise:
    """One exercise: what the student writes, and everything the kit knows about it."""

    def __init__(self, name: str, *, functions: tuple[str, ...], framework: str, track: str,
                 points: int, order: int, title: str, rule: Rule | None = None,
                 uses: tuple[str, ...] = (),
                 module_methods: tuple[str, ...] = ("__init__", "forward")):
        if framework not in FRAMEWORKS or track not in TRACKS:
            raise ValueError(f"{name}: framework must be one of {FRAMEWORKS}, track {TRACKS}")
        self.name = name
        self.functions = tuple(functions)
        self.framework = framework
        self.track = track
        self.points = points
        self.order = order  # where reports, stubs and notebooks list it (the course may move it)
        self.title = title  # one line for tables: what the student writes
        # What the file may not delegate to (grader.core.delegation); NumPy exercises may not
        # use torch, scipy, jax or tensorflow unless they declare otherwise.
        self.rule = rule if rule is not None else NUMPY_RULE if framework == "numpy" else Rule()
        # The other exercises its file may import (``from .softmax import softmax``): while it
        # is graded those are proxies that the answer key answers outside the worker, so one
        # mistake costs one exercise. Any other sibling import gets the student's own file.
        self.uses = tuple(uses)
        # What a proxied torch module class of those may do: be built, and run its forward
        # (answered by the key), unless the exercise is to compute that forward itself.
        self.module_methods = tuple(module_methods)
        self.checks: list[Check] = []
        self.misconceptions: dict[str, Misconception] = {}
        self.probes: list[tuple[str, Callable[[Any], bool]]] = []
        self.explained: dict[str, tuple[str, ...]] = {}  # misconception -> the checks it fails
        # misconception -> {function: its mistaken version, giving the candidate answers}
        self.mistaken: dict[str, dict[str, Callable[..., list[Any]]]] = {}
        self.judged: list[Judged] = []
        self.operations: dict[str, Callable[..., Any]] = {}
        self.references: dict[str, Callable[..., Any]] = {}

    def __repr__(self) -> str:
        return f"Exercise({self.name!r})"

    @property
    def filename(self) -> str:
        return f"{self.name}.py"

    # -- declaring ----------------------------------------------------------------------------
    def check(self, *, points: int, prop: str, hidden: bool = False, examples: int = 0,
              cases: Callable[[np.random.Generator], list[dict[str, Any]]] | None = None):
        """Register a check worth ``points`` (the default) with its property sentence, and
        the fixed ``cases`` every run of it includes (``Check.cases``)."""

        def decorate(func: Callable) -> Callable:
            if any(c.name == func.__name__ for c in self.checks):
                raise ValueError(f"{self.name}: two checks named {func.__name__}")
            self.checks.append(
                Check(self.name, func.__name__, points, prop, _recording_examples(func), hidden,
                      examples, cases)
            )
            return func

        return decorate

    def misconception(self, id: str, *, mistake: str, hint: str) -> Misconception:
        """Declare a misconception; probes of this or any other exercise may name it."""
        self.misconceptions[id] = Misconception(id, mistake, hint)
        return self.misconceptions[id]

    def probe(self, misconception_id: str, *, explains: tuple[str, ...],
              mistaken: dict[str, Callable[..., list[Any]]]):
        """Register a probe: a function of the student proxy, True when the submission makes
        exactly that mistake on the probe's fixed input.

        ``explains`` names the visible checks that the mistake makes fail (a version of the
        key with only that mistake fails each of them; ``tests/test_zoo.py`` holds every
        named zoo entry to it). Every other visible check failed for some other reason, and
        its feedback says nothing of this mistake.

        ``mistaken`` (function or operation name -> the mistaken version: the same arguments,
        a list of the answers the mistake may give; for an operation's dict reply, the keys
        the mistake decides) is what earns the hint: a failing check, visible or hidden,
        carries it only when, on the check's own shown example, the submission gave one of
        those answers and the reference would not have (``grader.core.diagnose.earned``).
        Where the mistake gives the right answer on that example (too small to show it), a
        check ``explains`` names carries the hint with the probe's own input beside it.
        """
        if not explains:
            raise ValueError(f"{self.name}: the probe for {misconception_id} explains no check")
        if not mistaken:
            raise ValueError(f"{self.name}: the probe for {misconception_id} has no mistaken "
                             "version (mistaken=): no check could earn its hint")

        def decorate(func: Callable[[Any], bool]) -> Callable[[Any], bool]:
            self.probes.append((misconception_id, func))
            self.explained[misconception_id] = tuple(explains)
            self.mistaken[misconception_id] = dict(mistaken)
            return func

        return decorate

    def explains(self, misconception_id: str, check: str, *, hidden: bool = False) -> bool:
        """Whether a failure of ``check`` supports the diagnosis ``misconception_id``."""
        return hidden or check in self.explained.get(misconception_id, ())

    def judge_input(self, call: str, *, label: str = "", covers: tuple[str, ...] = (),
                    reference: Callable[..., Any] | None = None) -> Judged:
        """Declare that the checks calling ``call`` (a function or an operation) earn their
        points only where its answers use their input (``Judged``). ``covers``: the names whose
        checks are judged by it (``call`` itself by default). ``reference``: what answers its
        calls rightly (the reference of that name by default; an operation runs on the
        exercise's references)."""
        if any(j.call == call for j in self.judged):
            raise ValueError(f"{self.name}: {call} is judged twice")
        judged = Judged(call, label or call, tuple(covers) or (call,),
                        reference or self._answers(call))
        self.judged.append(judged)
        return judged

    def _answers(self, call: str) -> Callable[..., Any]:
        """The reference answer of ``call``: its reference function, or its operation run on a
        module of the references, as the worker runs it on the student's."""
        if call in self.references:
            return self.references[call]
        operation = self.operations[call]
        return lambda *args, **kwargs: operation(types.SimpleNamespace(**self.references),
                                                 *args, **kwargs)

    def operation(self, func: Callable[..., Any] | None = None, *, measured: bool = False):
        """Register a worker operation (beyond calling one of ``functions``).

        It runs IN THE WORKER, which imports nothing of the kit: its source is sent there and
        run with NumPy, torch (``torch``, ``nn``, ``F``; a torch exercise's only) and the
        worker's helpers (``plain``, ``BadReturn``, ``seed_cpu``, ``linears``, ``load_state``,
        ``run_backward``) in scope. It takes the student's module first, then the request's
        keyword arguments. The answer key runs the same function in the grading process, with
        its own module.

        ``measured=True`` (``@EX.operation(measured=True)``): each call runs in a fresh worker,
        and the student proxy returns ``(reply, peak)``, ``peak`` being the bytes of memory the
        worker used beyond what it held before the file was loaded, read by the grading
        process from the kernel's account of the worker (None where it cannot be read)."""

        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            func.measured = measured  # type: ignore[attr-defined]
            self.operations[func.__name__] = func
            return func

        return register(func) if func is not None else register

    def reference(self, obj: Callable[..., Any]) -> Callable[..., Any]:
        """Register a trusted reference (a function or class the checks compare with).

        References named like the exercise's functions also answer, where there is no answer
        key, the proxies a worker grading *another* exercise gets for ``from .<name> import
        ...``; they run in the grading process, never in a worker. They are written with torch
        (or with calls the exercise forbids), so copying one is not an answer.
        """
        self.references[obj.__name__] = obj
        return obj

    # -- for the worker -----------------------------------------------------------------------
    def stopped_seconds(self, limits: Any) -> float:
        """The wall seconds this exercise's calls stopped at their CPU limit may take in all,
        on a machine that gives each worker half a CPU (the exercise's own limit,
        ``Limits.timeout``, leaves them out): two per check (one in the exercise's one pass,
        ``grader.core.one_pass``, and one a check that failed before it meets asked alone),
        ``SHRINK_STOPS`` more and one that ends the diagnosis, each its limit (a measured
        operation's ten times it) and a second for a fresh worker. A call that waits without
        computing is stopped by its wall limit instead (``call_limit.CALL_WALL`` times the
        CPU limit), later than this counts."""
        from ..sandbox.isolation import MEASURED_CALLS, TORCH_CALLS

        call = limits.call * (TORCH_CALLS if self.framework == "torch" else 1)
        calls = 2 * len(self.checks) + SHRINK_STOPS + 1
        measured = sum(getattr(op, "measured", False) for op in self.operations.values())
        return calls * (2 * call + 1) + measured * (2 * MEASURED_CALLS * call + 1)

    def operation_sources(self) -> dict[str, str]:
        return {name: definition_source(func) for name, func in self.operations.items()}
