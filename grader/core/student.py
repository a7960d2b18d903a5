"""The checks' view of a submission: its functions and operations, run in a worker.

``Student`` looks like the exercise's module (``student.softmax(x, axis=0)``) but every call
crosses to the worker process and back as plain data. An exercise's operations
(``student.mha_forward(...)``) are reached the same way, as is the answer key.
"""

from __future__ import annotations

from typing import Any

from ..sandbox.isolation import MALFORMED, Sandbox, StudentError, WorkerLost
from .exercise import Exercise


class NotImplementedYet(BaseException):
    """The student's function still raises NotImplementedError (a BaseException, so that
    Hypothesis stops at once instead of shrinking a stub)."""


def _wire(value: Any) -> Any:
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_wire(v) for v in value)
    return value


class Student:
    def __init__(self, sandbox: Sandbox, exercise: Exercise, *, trusted: bool = False):
        self._sandbox = sandbox
        self._exercise = exercise
        self._trusted = trusted  # the answer key: no delegation rule

    def load(self) -> dict[str, Any]:
        """Load the exercise's file in the worker, with its stand-ins and operations."""
        from .course import EXERCISES_BY_NAME

        exercise = self._exercise
        stand_ins = {}
        for name, other in EXERCISES_BY_NAME().items():
            if name == exercise.name or name in exercise.rule.siblings:
                continue  # never an implementation of the exercise itself
            spec = other.stand_in()
            if spec is not None:
                stand_ins[name] = spec
        reply = self._sandbox.request(
            "load", functions=list(exercise.functions), stand_ins=stand_ins,
            ops=exercise.operation_sources(),
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
