"""The checks' view of a submission: its functions and operations, run in a worker.

``Student`` looks like the exercise's module (``student.softmax(x, axis=0)``) but every call
crosses to the worker process and back as plain data. An exercise's operations
(``student.mha_forward(...)``) are reached the same way, as is the answer key.
"""

from __future__ import annotations

from typing import Any

from ..sandbox.isolation import Sandbox, StudentError
from .exercise import Exercise


class NotImplementedYet(BaseException):
    """The student's function still raises NotImplementedError (a BaseException, so that
    Hypothesis stops at once instead of shrinking a stub)."""


def _wire(value: Any) -> Any:
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_wire(v) for v in value)
    return value


class Student:
    def __init__(self, sandbox: Sandbox, exercise: Exercise):
        self._sandbox = sandbox
        self._exercise = exercise

    def load(self) -> dict[str, Any]:
        """Load the exercise's file in the worker, with its stand-ins and operations."""
        from .course import EXERCISES_BY_NAME

        stand_ins = {}
        for name, other in EXERCISES_BY_NAME().items():
            spec = other.stand_in() if name != self._exercise.name else None
            if spec is not None:
                stand_ins[name] = spec
        return self._sandbox.request(
            "load", functions=list(self._exercise.functions), stand_ins=stand_ins,
            ops=self._exercise.operation_sources())

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
