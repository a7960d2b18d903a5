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
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import os
import pickle
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
            data = {name: DataObject(example.kwargs[name]) for name in example.data}
            kwargs = {name: data.get(name) or copy.deepcopy(value)
                      for name, value in example.kwargs.items()}
            if index:
                reseed()
            try:
                inner(ctx, **kwargs)
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
    block; they are kept for ``key`` if the block ends normally (the check passed) and every
    example completed."""
    if key in _RECORDED:
        yield
        return
    inner = hypothesis.inner_test
    taken: list[Example] = []
    complete = [True]

    def recorder(ctx: Any, **kwargs: Any) -> None:
        record: dict[str, Any] = {}
        for name, value in kwargs.items():
            if is_data(value):
                record[name] = _recording_draws(value)
            else:
                record[name] = copy.deepcopy(value)
        taken.append(Example(record, frozenset(n for n, v in kwargs.items() if is_data(v))))
        try:
            inner(ctx, **kwargs)
        except BaseException:
            complete[0] = False
            raise

    hypothesis.inner_test = recorder
    try:
        yield
    finally:
        hypothesis.inner_test = inner
    # Only a run that passed reaches here, and in a run that passed, an example that raised
    # was one Hypothesis discarded (an unmet assumption, an overrun).
    if complete[0] and taken:
        _RECORDED[key] = tuple(taken)


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


# -- kept on disk, for the next `grader grade` ---------------------------------------------------
# A student runs `make grade` after every edit: the command keeps its recordings in the kit's
# build folder, under a name that digests everything they depend on (the kit's own code, the
# versions of Python, Hypothesis, NumPy and torch), and reads them back on its next run. Only
# the command line does (``grader.integrations.cli``): a test that patches a strategy in its
# own process cannot leave its examples there. The file is the grading user's own (0600); it
# is read with an unpickler that builds nothing but plain data, NumPy arrays and the kit's own
# records, so a file someone else wrote can, at worst, be unusable.
CACHE = Path(__file__).resolve().parents[2] / "build" / "replay"
_SAVED = [0]  # how many recordings the cache file held or was written with


def seed_digest(seed_text: str) -> str:
    """The seed text as a recording's key holds it (a course secret is never written)."""
    return hashlib.sha256(seed_text.encode()).hexdigest()[:16]


def cache_file() -> Path:
    import hypothesis
    import numpy
    import torch

    digest = hashlib.sha256(repr((sys.version, hypothesis.__version__, numpy.__version__,
                                  torch.__version__)).encode())
    kit = Path(__file__).resolve().parents[1]
    for path in sorted(kit.rglob("*.py")):
        digest.update(str(path.relative_to(kit)).encode() + b"\0" + path.read_bytes())
    return CACHE / f"{digest.hexdigest()[:32]}.pickle"


def _checks() -> dict[Any, tuple[str, str]]:
    from .course import EXERCISES_BY_NAME

    return {check.func: (name, check.name) for name, exercise in EXERCISES_BY_NAME().items()
            for check in exercise.checks}


def recorded() -> set[tuple]:
    """The keys of this process's recordings (to tell a child's new ones: ``grader.core.lanes``)."""
    return set(_RECORDED)


def named(keys: set[tuple] | None = None) -> dict[tuple, tuple[Example, ...]]:
    """The recordings of ``keys`` (default: all) of the kit's checks, each keyed by its
    exercise and check name instead of its function: what another process can read."""
    names = _checks()
    return {(*names[func], *rest): examples for (func, *rest), examples in _RECORDED.items()
            if func in names and (keys is None or (func, *rest) in keys)}


def adopt(known: dict[tuple, tuple[Example, ...]]) -> int:
    """Keep the recordings ``known`` (as ``named`` gives them) that this process lacks;
    returns how many of ``known`` are the kit's checks."""
    checks = {names: func for func, names in _checks().items()}  # their modules imported
    found = {(checks[(exercise, name)], *rest): examples
             for (exercise, name, *rest), examples in known.items()
             if (exercise, name) in checks}
    for key, examples in found.items():
        _RECORDED.setdefault(key, examples)
    return len(found)


def save_cache() -> None:
    """Write this process's recordings of the kit's checks, when it holds new ones."""
    known = named()
    if len(known) <= _SAVED[0]:
        return
    with contextlib.suppress(OSError, pickle.PicklingError, TypeError, AttributeError):
        path = cache_file()
        write_private(path, pickle.dumps(known, protocol=5))
        _SAVED[0] = len(known)
        for old in path.parent.glob("*.pickle"):  # an earlier kit's (or library's): never read
            if old != path and old.stat().st_uid == os.geteuid():
                old.unlink()


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` as the grading user's own file (0600), whole or not at all
    (a temporary file beside it, then renamed); OSError where it cannot."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(temporary, path)


def load_cache() -> None:
    """Read the recordings of the kit's checks a previous run left (nothing when there are
    none, or they cannot be read)."""
    path = cache_file()
    try:
        if path.stat().st_uid != os.geteuid():
            return
        known = read(path.read_bytes())
        adopt(known)
    except (OSError, pickle.UnpicklingError, ValueError, TypeError, EOFError, AttributeError,
            ImportError, IndexError, KeyError):
        return
    _SAVED[0] = len(known)


def read(data: bytes) -> Any:
    """What ``data`` pickles, read with ``Unpickler`` (the kit's checks imported first: their
    modules define the records a recording holds)."""
    _checks()
    return Unpickler(io.BytesIO(data)).load()


_BUILTINS = frozenset({"tuple", "list", "dict", "set", "frozenset", "complex", "slice",
                       "range", "bytearray"})
_NUMPY = frozenset({"_reconstruct", "ndarray", "dtype", "scalar", "_frombuffer"})


class Unpickler(pickle.Unpickler):
    """Builds plain data, NumPy arrays and the kit's own records (``Example``, the problems'
    named tuples): nothing that runs code of the file's choosing."""

    def find_class(self, module: str, name: str) -> Any:
        found = None
        if (module == "builtins" and name in _BUILTINS) or (
                module.split(".")[0] == "numpy" and (name in _NUMPY or name.endswith("DType"))):
            found = super().find_class(module, name)
        elif module.startswith("grader.") and module in sys.modules:
            candidate = getattr(sys.modules[module], name, None)
            if candidate is Example or (isinstance(candidate, type)
                                        and issubclass(candidate, tuple)
                                        and hasattr(candidate, "_fields")):
                found = candidate
        if found is None:
            raise pickle.UnpicklingError(f"{module}.{name} is not something a recording holds")
        return found
