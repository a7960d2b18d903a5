"""The checks' view of a submission: its functions, called in a worker.

``Student`` looks like the exercise's module (``student.softmax(x, axis=0)``) but every call
crosses to the worker process and back as plain data. The answer key is reached the same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .exercises import BY_NAME
from .isolation import Sandbox, StudentError


class NotImplementedYet(BaseException):
    """The student's function still raises NotImplementedError (a BaseException, so that
    Hypothesis stops at once instead of shrinking a stub)."""


def _wire(value: Any) -> Any:
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_wire(v) for v in value)
    return value


class Student:
    def __init__(self, sandbox: Sandbox, exercise: str):
        self._sandbox = sandbox
        self._exercise = exercise
        self._functions = BY_NAME[exercise].functions

    def _request(self, op: str, **kwargs: Any) -> Any:
        try:
            return self._sandbox.request(op, **kwargs)
        except StudentError as error:
            if error.not_implemented:
                raise NotImplementedYet(error.describe()) from None
            raise

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._functions:
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._request("call", func=name, args=_wire(list(args)), kwargs=kwargs)

        call.__name__ = name
        return call

    # -- the mha exercise: whole-module requests ------------------------------------------
    def mha_build(self, d_model: int, n_head: int, bias: bool) -> dict[str, Any]:
        return self._request("mha_build", d_model=d_model, n_head=n_head, bias=bias)

    def mha_forward(
        self,
        d_model: int,
        n_head: int,
        bias: bool,
        state: dict[str, np.ndarray],
        x: np.ndarray,
        mask: np.ndarray | None = None,
        grad_y: np.ndarray | None = None,
        device: str = "cpu",
    ) -> dict[str, Any]:
        return self._request(
            "mha_forward", d_model=d_model, n_head=n_head, bias=bias, state=state, x=x,
            mask=mask, grad_y=grad_y, device=device,
        )

    # -- the bonus exercises gqa and decode: whole-object requests (grader.worker_bonus) ----
    def gqa_build(self, d_model: int, n_head: int, n_kv_head: int, bias: bool) -> dict[str, Any]:
        return self._request(
            "gqa_build", d_model=d_model, n_head=n_head, n_kv_head=n_kv_head, bias=bias
        )

    def gqa_forward(
        self,
        d_model: int,
        n_head: int,
        n_kv_head: int,
        bias: bool,
        state: dict[str, np.ndarray],
        x: np.ndarray,
        mask: np.ndarray | None = None,
        device: str = "cpu",
    ) -> dict[str, Any]:
        return self._request(
            "gqa_forward", d_model=d_model, n_head=n_head, n_kv_head=n_kv_head, bias=bias,
            state=state, x=x, mask=mask, device=device,
        )

    def decode_run(
        self,
        d_model: int,
        n_head: int,
        bias: bool,
        state: dict[str, np.ndarray],
        xs: list[np.ndarray],
        device: str = "cpu",
    ) -> dict[str, Any]:
        """``decode_step`` over the chunks ``xs`` with one cache: ``{"ys", "lengths"}``."""
        return self._request(
            "decode_run", d_model=d_model, n_head=n_head, bias=bias, state=state, xs=list(xs),
            device=device,
        )

    def kvcache_run(self, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``append`` after ``append`` on one ``KVCache``: ``[{"len", "k", "v"}, ...]``."""
        return self._request("kvcache_run", steps=list(steps))
