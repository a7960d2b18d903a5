"""The replay's recordings outside this process: kept on disk for the next ``grader grade``
(``save_cache``, ``load_cache``), and handed to and taken from the other processes of a run
(``recorded``, ``named``, ``adopt``, read back with ``read``), always as plain data read with
an unpickler that builds nothing else (``Unpickler``). Split from ``grader.core.replay``, which
records, replays and follows them in this process.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import pickle
import sys
from pathlib import Path
from typing import Any

from .replay import _RECORDED, _SAVED, MAX_RUNS, MAX_STEPS, TRANSCRIPT, Example, _runs

# -- kept on disk, for the next `grader grade` ---------------------------------------------------
# A student runs `make grade` after every edit: the command keeps its recordings in the kit's
# build folder, under a name that digests everything they depend on (the kit's own code, the
# versions of Python, Hypothesis, NumPy and torch), and reads them back on its next run. Only
# the command line does (``grader.integrations.routes.cli``): a test that patches a strategy in its
# own process cannot leave its examples there. The file is the grading user's own (0600); it
# is read with an unpickler that builds nothing but plain data, NumPy arrays and the kit's own
# records, so a file someone else wrote can, at worst, be unusable.
CACHE = Path(__file__).resolve().parents[2] / "build" / "replay"


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
        if TRANSCRIPT in key[-2:]:  # a failing run: only as many as one kept here, and whole
            if (key in _RECORDED or len(_runs(key[:-2])) >= MAX_RUNS
                    or not _is_run(examples)):
                continue
        _RECORDED.setdefault(key, examples)
    return len(found)


def _is_run(steps: Any) -> bool:
    """Whether ``steps`` is a failing run as ``recording`` keeps one."""
    return (type(steps) is tuple and 0 < len(steps) <= MAX_STEPS
            and all(type(step) is tuple and len(step) == 3 and type(step[0]) is Example
                    and type(step[0].kwargs) is dict and type(step[0].data) is frozenset
                    and all(type(step[0].kwargs.get(n)) is list for n in step[0].data)
                    and type(step[1]) is tuple and type(step[2]) is str for step in steps)
            and steps[-1][1][:1] == ("failed",))


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
