"""The checks' view of a submission: its functions and operations, run in a worker.

``Student`` looks like the exercise's module (``student.softmax(x, axis=0)``) but every call
crosses to the worker process and back as plain data. An exercise's operations
(``student.mha_forward(...)``) are reached the same way, as is the answer key.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import sys
import types
from pathlib import Path
from typing import Any

from ..sandbox.isolation import MALFORMED, Sandbox, StudentError, WorkerLost
from ..sandbox.worker import plain
from .exercise import Exercise


class NotImplementedYet(BaseException):
    """The student's function still raises NotImplementedError (a BaseException, so that
    Hypothesis stops at once instead of shrinking a stub)."""


def _wire(value: Any) -> Any:
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_wire(v) for v in value)
    return value


class Student:
    def __init__(self, sandbox: Sandbox, exercise: Exercise, *, trusted: bool = False,
                 key_folder: Path | None = None):
        self._sandbox = sandbox
        self._exercise = exercise
        self._trusted = trusted  # the answer key itself: its own files, no rule
        self._key_folder = key_folder  # where the stand-ins come from, when there is one

    def stand_ins(self) -> dict[str, dict[str, Any]]:
        """The modules the exercise's file may import from other exercises (``uses``, and what
        they use), in the order they load: the answer key's, or without a key the kit's torch
        references. None for the answer key itself (its folder holds its own)."""
        from .course import EXERCISES_BY_NAME

        if self._trusted:
            return {}
        known = EXERCISES_BY_NAME()
        order: list[str] = []

        def add(name: str) -> None:
            for dep in known[name].uses:
                add(dep)
            if name not in order and name != self._exercise.name:
                order.append(name)

        for dep in self._exercise.uses:
            add(dep)
        specs = {}
        for name in order:
            path = self._key_folder / f"{name}.py" if self._key_folder else None
            if path is not None and path.is_file():
                specs[name] = {"source": path.read_text(), "exports": list(known[name].functions),
                               "kind": "key"}
            elif (spec := known[name].stand_in()) is not None:
                specs[name] = {**spec, "kind": "reference"}
        return specs

    def load(self) -> dict[str, Any]:
        """Load the exercise's file in the worker, with its stand-ins and operations."""
        exercise = self._exercise
        reply = self._sandbox.request(
            "load", functions=list(exercise.functions), stand_ins=self.stand_ins(),
            ops=exercise.operation_sources(), framework=exercise.framework,
            rule=None if self._trusted else exercise.rule.as_config())
        missing = reply.get("missing") if isinstance(reply, dict) else None
        if not isinstance(missing, list) or not all(isinstance(m, str) for m in missing):
            self._sandbox.kill()
            raise WorkerLost(MALFORMED)
        return reply

    def _request(self, op: str, **kwargs: Any) -> Any:
        try:
            return self._sandbox.request(op, **kwargs)
        except StudentError as error:
            if error.not_implemented:
                raise NotImplementedYet(error.describe()) from None
            raise

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._exercise.functions:
            def call(*args: Any, **kwargs: Any) -> Any:
                return self._request("call", func=name, args=_wire(list(args)), kwargs=kwargs)
        elif name in self._exercise.operations:
            signature = self._exercise.operations[name].__code__
            params = signature.co_varnames[1:signature.co_argcount]  # after the module

            def call(*args: Any, **kwargs: Any) -> Any:
                kwargs.update(zip(params, args))
                return self._request(name, **{k: _wire(v) for k, v in kwargs.items()})
        else:
            raise AttributeError(name)
        call.__name__ = name
        return call


class AnswerKey:
    """The answer key's functions and operations, called in the grading process with what the
    student's worker is sent, answers converted as the worker converts them.

    The key is trusted, and no worker is ever forked from a grading process (they come from
    the zygote), so running it here puts no answer within a student's reach; it spares every
    submission a worker per exercise.
    """

    def __init__(self, folder: Path, exercise: Exercise):
        self._exercise = exercise
        self._module = _key_module(Path(folder).resolve(), exercise.name)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._exercise.functions:
            function = getattr(self._module, name)

            def call(*args: Any, **kwargs: Any) -> Any:
                args, kwargs = copy.deepcopy((args, kwargs))  # as the worker gets a copy
                return plain(function(*args, **kwargs), f"what {name} returned")
        elif name in self._exercise.operations:
            operation = self._exercise.operations[name]

            def call(*args: Any, **kwargs: Any) -> Any:
                args, kwargs = copy.deepcopy((args, kwargs))
                return operation(self._module, *args, **kwargs)
        else:
            raise AttributeError(name)
        call.__name__ = name
        return call


def _key_module(folder: Path, exercise: str) -> Any:
    """``folder/<exercise>.py`` as a module of a package of its own (one per key folder), so
    its sibling imports get the key's own files."""
    package = "answer_key_" + hashlib.sha256(str(folder).encode()).hexdigest()[:12]
    if package not in sys.modules:
        root = types.ModuleType(package)
        root.__path__ = [str(folder)]  # type: ignore[attr-defined]
        sys.modules[package] = root
    return importlib.import_module(f"{package}.{exercise}")
