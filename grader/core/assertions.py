"""Comparisons that fail with a message a student can act on.

Tolerances, per dtype of the inputs (rtol, atol), come from the course (``course.toml``); a
float32 input may come back as float64 and is compared at float32 tolerance. The defaults:

    float64: rtol 1e-7, atol 1e-9
    float32: rtol 1e-4, atol 1e-5
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import numpy as np

from ..sandbox.isolation import StudentError
from .course import DEFAULT_TOLERANCES

_TOLERANCES: ContextVar[dict[str, tuple[float, float]]] = ContextVar(
    "tolerances", default=DEFAULT_TOLERANCES)


@contextlib.contextmanager
def tolerances(table: dict[str, tuple[float, float]]) -> Iterator[None]:
    """Compare with ``table`` (the course's tolerances per dtype) inside this block."""
    token = _TOLERANCES.set(dict(table))
    try:
        yield
    finally:
        _TOLERANCES.reset(token)


class CheckFailed(AssertionError):
    def __init__(self, message: str, *, expected: Any = None, got: Any = None):
        super().__init__(message)
        self.message = message
        self.expected = expected
        self.got = got


def tolerance(dtype: Any) -> tuple[float, float]:
    table = _TOLERANCES.get()
    return table.get(np.dtype(dtype).name, table["float32"])


def _scalar(x: Any) -> str:
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if isinstance(x, (float, np.floating)):
        return f"{float(x):.4g}"
    if isinstance(x, (complex, np.complexfloating)):
        return f"{complex(x):.4g}"
    return str(x)


def _nested(array: np.ndarray) -> str:
    if array.ndim == 0:
        return _scalar(array[()])
    return "[" + ", ".join(_nested(row) for row in array) + "]"


def fmt(value: Any) -> str:
    """A small, readable, one-line rendering of an input or output."""
    if isinstance(value, np.ndarray):
        if value.size <= 64:
            body = _nested(value)
        else:
            body = " ".join(np.array2string(
                value, precision=4, separator=", ", threshold=64, edgeitems=2,
            ).split())
        if value.ndim <= 1 and value.size <= 8:
            return f"{body} ({value.dtype})"
        return f"{body} ({value.dtype}, shape {value.shape})"
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return ", ".join(f"{k} {fmt(v)}" for k, v in zip(value._fields, value))
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {fmt(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float):
        return f"{value:.6g}"
    return repr(value)


def as_array(value: Any, what: str) -> np.ndarray:
    if isinstance(value, np.generic):
        return np.asarray(value)
    if not isinstance(value, np.ndarray):
        raise CheckFailed(f"{what} should be an array, got {type(value).__name__}")
    return value


def assert_shape(got: Any, shape: tuple[int, ...], what: str = "the result") -> np.ndarray:
    got = as_array(got, what)
    if got.shape != tuple(shape):
        raise CheckFailed(
            f"{what} has shape {got.shape}, expected {tuple(shape)}",
            expected=f"shape {tuple(shape)}", got=f"shape {got.shape}",
        )
    return got


def assert_close(
    got: Any, expected: Any, *, dtype: Any = np.float64, what: str = "the result"
) -> None:
    expected = np.asarray(expected)
    got = assert_shape(got, expected.shape, what)
    if got.dtype.kind not in "biuf":
        raise CheckFailed(f"{what} has dtype {got.dtype}, expected real numbers")
    rtol, atol = tolerance(dtype)
    g, e = got.astype(np.float64), expected.astype(np.float64)
    bad = ~np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=False)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        where = f" at index {index}" if index else ""
        raise CheckFailed(
            f"{what}: got {g[index]:.6g}{where}, expected {e[index]:.6g} "
            f"({int(bad.sum())} of {bad.size} entries off; rtol {rtol:g}, atol {atol:g})",
            expected=expected, got=got,
        )


def assert_equal(got: Any, expected: Any, what: str = "the result") -> None:
    expected = np.asarray(expected)
    got = assert_shape(got, expected.shape, what)
    if got.dtype != expected.dtype and expected.dtype == np.bool_:
        raise CheckFailed(f"{what} has dtype {got.dtype}, expected bool")
    if not np.array_equal(got, expected):
        raise CheckFailed(f"{what} is wrong", expected=expected, got=got)


def assert_matches_key(got: Any, expected: Any, *, dtype: Any = np.float64,
                       what: str = "the result") -> None:
    """``got`` has the answer key's structure (the same tuple lengths, dict keys and shapes)
    and its values: close for floats, equal for booleans and integers. An empty tuple, a
    missing key or an extra element fails; it never compares nothing."""
    if isinstance(expected, tuple):
        if not isinstance(got, tuple) or len(got) != len(expected):
            size = f"a tuple of {len(got)}" if isinstance(got, tuple) else type(got).__name__
            raise CheckFailed(f"{what} is {size}; the answer key returns a tuple of "
                              f"{len(expected)}")
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_matches_key(g, e, dtype=dtype, what=f"{what} [{i}]")
    elif isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            raise CheckFailed(f"{what} has keys {sorted(got) if isinstance(got, dict) else got!r}"
                              f", expected {sorted(expected)}")
        for key in expected:
            assert_matches_key(got[key], expected[key], dtype=dtype, what=f"{what} {key}")
    elif isinstance(expected, list):
        if not isinstance(got, list) or len(got) != len(expected):
            raise CheckFailed(f"{what} should be a list of {len(expected)}")
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_matches_key(g, e, dtype=dtype, what=f"{what} [{i}]")
    elif np.asarray(expected).dtype.kind in "biu":
        assert_equal(got, expected, what)
    else:
        assert_close(got, expected, dtype=dtype, what=what)


def expect_value_error(call: Callable[[], Any], what: str) -> None:
    """``call`` must raise ValueError; ``what`` describes the bad input."""
    try:
        result = call()
    except StudentError as error:
        if error.is_value_error:
            return
        raise CheckFailed(
            f"for {what}, expected ValueError, but it raised {error.describe()}"
        ) from None
    raise CheckFailed(
        f"for {what}, expected ValueError, but it returned a result", got=result
    )
