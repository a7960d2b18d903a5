"""Comparisons that fail with a message a student can act on.

A failed comparison names the entry furthest off with enough digits to show the difference,
the largest absolute and relative errors against the tolerance, and says so when a result for
float64 input is right only to float32 precision. Values print exactly by default (``fmt``: the
shortest text that reads back as the same number), so a failing input can be pasted back into
a call.

Tolerances, per dtype of the inputs (rtol, atol), come from the course (``course.toml``); a
float32 input may come back as float64 and is compared at float32 tolerance. The defaults:

    float64: rtol 1e-7, atol 1e-9
    float32: rtol 1e-4, atol 1e-5

A check of a computation that float64 does to its rounding on the check's bounded inputs (a
softmax of logits in [-10, 10]) asks for that instead (``rounding=True``): see ``ROUNDING``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np

from ..sandbox.errors import StudentError
from .course import DEFAULT_TOLERANCES
from .plural import counted, noun

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
    """A check's failure: its message, and the expected and got values to print beside it.
    ``off``: which entries of them the check found off (a boolean array of their shape), for
    ``fmt_pair``; None when every entry that differs is off."""

    def __init__(self, message: str, *, expected: Any = None, got: Any = None, off: Any = None):
        super().__init__(message)
        self.message = message
        self.expected = expected
        self.got = got
        self.off = off


# float64's rounding of a short computation on bounded inputs. A softmax of logits in
# [-10, 10] over slices of up to 4 entries, written any way (shifted or not, log-sum-exp,
# reciprocal, loops): each operation is off by at most 1.1e-16 relative, exp() turns an error
# in its argument (at most 2e-15 for arguments below 21) into the same relative error, so the
# result is within about 1e-14 of the exact softmax. A float32 operation is off by up to 6e-8,
# so a result that went through float32 misses rtol 1e-12 wherever that rounding shows at all,
# and a check adds an input where it always does (softmax.FLOAT32_VISIBLE): the verdict no
# longer depends on the drawn examples. It applies only when the course's float64 tolerance
# asks for more than float32 can give (rtol below float32's epsilon, 1.2e-7, as the default
# 1e-7 does); a course that accepts float32 accuracy keeps its own.
ROUNDING = (1e-12, 1e-15)
FLOAT32_EPS = float(np.finfo(np.float32).eps)


def tolerance(dtype: Any, *, rounding: bool = False) -> tuple[float, float]:
    table = _TOLERANCES.get()
    rtol, atol = table.get(np.dtype(dtype).name, table["float32"])
    if rounding and np.dtype(dtype) == np.float64 and rtol < FLOAT32_EPS:
        return min(rtol, ROUNDING[0]), min(atol, ROUNDING[1])
    return rtol, atol


def _exact(x: Any) -> str:
    """The shortest text that reads back as exactly ``x`` in its own dtype ("1", not "1.0"),
    with NumPy's names for infinities and NaN (``-np.inf``), so it can be pasted into a call."""
    if not np.isfinite(x):
        return "np.nan" if np.isnan(x) else ("np.inf" if x > 0 else "-np.inf")
    text = str(x)  # Python's and NumPy's shortest round-trip form, float32 included
    return text[:-2] if text.endswith(".0") and text != "-0.0" else text


def _scalar(x: Any, digits: int | None = None) -> str:
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if isinstance(x, (float, np.floating)):
        return _exact(x) if digits is None else f"{float(x):.{digits}g}"
    if isinstance(x, (complex, np.complexfloating)):
        return repr(complex(x)) if digits is None else f"{complex(x):.{digits}g}"
    return str(x)


def _nested(array: np.ndarray, digits: int | None) -> str:
    if array.ndim == 0:
        return _scalar(array[()], digits)
    return "[" + ", ".join(_nested(row, digits) for row in array) + "]"


def fmt(value: Any, digits: int | None = None) -> str:
    """A one-line rendering of an input or output. Numbers are exact by default (they read back
    as the same value, so an input can be pasted into a call), or have ``digits`` significant
    digits; arrays of more than 64 entries are summarised."""
    if isinstance(value, np.ndarray):
        if value.size <= 64:
            body = _nested(value, digits)
        else:
            body = " ".join(np.array2string(
                value, precision=digits or 4, separator=", ", threshold=64, edgeitems=2,
            ).split()) + " (summarised)"
        if value.ndim <= 1 and value.size <= 8:
            return f"{body} ({value.dtype})"
        return f"{body} ({value.dtype}, shape {value.shape})"
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return ", ".join(f"{k} {fmt(v, digits)}" for k, v in zip(value._fields, value))
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {fmt(v, digits)}" for k, v in value.items()) + "}"
    if isinstance(value, list) and any(isinstance(v, (np.ndarray, dict, list)) for v in value):
        return "[" + ", ".join(fmt(v, digits) for v in value) + "]"  # arrays as arrays print
    if isinstance(value, (float, np.floating, complex, np.complexfloating)):
        return _scalar(value, digits)
    return repr(value)


def digits_to_tell_apart(a: Any, b: Any, *, start: int = 4) -> int:
    """The fewest significant digits (from ``start``, at most 17) that print the numbers of
    ``a`` and ``b`` differently (whatever their dtypes); 17 when even those are equal."""

    def numbers(x: Any) -> Any:
        if isinstance(x, (np.ndarray, np.generic)) and x.dtype.kind in "iuf":
            return np.asarray(x, dtype=np.float64)
        return x

    a, b = numbers(a), numbers(b)
    for digits in range(start, 17):
        if fmt(a, digits) != fmt(b, digits):
            return digits
    return 17


def fmt_pair(expected: Any, got: Any, off: Any = None) -> tuple[str, str]:
    """``expected`` and ``got`` printed with the same, smallest number of digits (4 at least)
    that shows each entry that is off as different: the entries ``off`` marks (a boolean array
    of their shape), or every entry that differs. An entry within the tolerance may print
    alike; one named as off never does."""
    digits = 4
    try:
        e, g = (np.atleast_1d(a) for a in np.broadcast_arrays(np.asarray(expected),
                                                            np.asarray(got)))
        marked = ~_same_values(e, g)
        if off is not None:
            marked &= np.atleast_1d(np.broadcast_to(off, np.shape(expected)))
        for index in np.argwhere(marked)[:64]:  # more are summarised: printed in part
            digits = max(digits, digits_to_tell_apart(e[tuple(index)], g[tuple(index)]))
    except (ValueError, TypeError):  # shapes that do not pair, values that do not compare
        digits = digits_to_tell_apart(expected, got)
    return fmt(expected, digits), fmt(got, digits)


def _same_values(e: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Equal entries, NaN beside NaN included."""
    same = np.asarray(e == g)
    if e.dtype.kind in "fc" and g.dtype.kind in "fc":
        same = same | (np.isnan(e) & np.isnan(g))
    return same


def as_array(value: Any, what: str) -> np.ndarray:
    if isinstance(value, np.generic):
        return np.asarray(value)
    if not isinstance(value, np.ndarray):
        raise CheckFailed(f"{what} should be an array, got {type(value).__name__}")
    return value


def assert_shape(got: Any, shape: tuple[int, ...], what: str = "the result") -> np.ndarray:
    got = as_array(got, what)
    if got.shape != tuple(shape):
        raise CheckFailed(f"{what}: got shape {got.shape}, expected shape {tuple(shape)}")
    return got


def assert_close(
    got: Any, expected: Any, *, dtype: Any = np.float64, what: str = "the result",
    rounding: bool = False,
) -> None:
    """``got`` matches ``expected`` within the tolerance for ``dtype`` (the inputs' dtype);
    ``rounding``: the computation's own float64 rounding, where the course asks for more than
    float32 accuracy (``ROUNDING``)."""
    expected = np.asarray(expected)
    got = assert_shape(got, expected.shape, what)
    if got.dtype.kind not in "biuf":
        raise CheckFailed(f"{what}: got dtype {got.dtype}, expected real numbers")
    rtol, atol = tolerance(dtype, rounding=rounding)
    g, e = got.astype(np.float64), expected.astype(np.float64)
    bad = ~np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=False)
    if bad.any():
        message = mismatch(g, e, bad, dtype=np.dtype(dtype), got_dtype=got.dtype, what=what,
                           rounding=rounding)
        if np.isnan(e).any():  # no expectation (a value of the student's own, say): no pair
            raise CheckFailed(message)
        raise CheckFailed(message, expected=expected, got=got, off=bad)


def mismatch(g: np.ndarray, e: np.ndarray, bad: np.ndarray, *, dtype: np.dtype,
             got_dtype: np.dtype, what: str, rounding: bool = False) -> str:
    """What a failed ``assert_close`` says: the worst entry with enough digits to see the
    difference, the largest absolute and relative errors against the tolerance, and a word
    when the result is right to float32 precision on float64 input."""
    rtol, atol = tolerance(dtype, rounding=rounding)
    with np.errstate(all="ignore"):
        error = np.where(g == e, 0.0, np.abs(g - e))  # equal infinities: no error
        broken = bad & ~(np.isfinite(g) & np.isfinite(e))  # NaN or inf where it should not be
        if broken.any():
            index = tuple(int(i) for i in np.argwhere(broken)[0])
        else:
            excess = np.where(bad, error / (atol + rtol * np.abs(e)), -1.0)
            index = tuple(int(i) for i in np.unravel_index(np.argmax(excess), excess.shape))
        digits = digits_to_tell_apart(g[index], e[index], start=6)
        where = f" at index {index}" if index else ""
        due = f"expected {e[index]:.{digits}g}"
        if np.isnan(g[index]) and np.isnan(e[index]):  # both sides went through one NaN
            due = "where a number is due: the value it is compared with is NaN as well"
        elif np.isnan(e[index]):  # what it is compared with is no expectation: a NaN
            due = "where the value it is compared with is NaN, and a number is due"
        lines = [f"{what}: got {g[index]:.{digits}g}{where}, {due} "
                 f"({int(bad.sum())} of {counted(bad.size, 'entry', 'entries')} off)"]
        if broken.any():
            if bad.sum() > 1:  # else the entry named above is the one
                lines.append(f"{int(broken.sum())} of the entries off "
                             f"{noun(broken.sum(), 'is', 'are')} NaN or infinite.")
            return "\n".join(lines)
        relative = np.where(e != 0, error / np.abs(e), np.where(error > 0, np.inf, 0.0))
        # of the entries off: a tiny entry within atol may be off by 100% relative, and say
        # nothing of them
        lines.append(f"Largest error {error[bad].max():.2g} absolute, "
                     f"{relative[bad].max():.2g} relative; "
                     f"the {dtype.name} tolerance allows |got - expected| <= {atol:g} + {rtol:g} "
                     "* |expected|" + (" (float64 rounding: this computation needs no more)"
                                       if (rtol, atol) != tolerance(dtype) else ""))
    rtol32, atol32 = tolerance(np.float32)
    float32_like = np.allclose(g, e, rtol=rtol32, atol=atol32)
    if rounding:  # an error far below float32's own rounding is no float32 computation
        float32_like = float32_like and error.max() >= FLOAT32_EPS / 100 * np.abs(e).max()
    if dtype == np.float64 and float32_like:
        note = " (the result is float32)" if got_dtype == np.float32 else ""
        lines.append(f"It agrees to float32 precision{note}: part of the computation ran in "
                     "float32? Keep float64 input in float64 throughout.")
    return "\n".join(lines)


def assert_equal(got: Any, expected: Any, what: str = "the result") -> None:
    expected = np.asarray(expected)
    got = assert_shape(got, expected.shape, what)
    if got.dtype != expected.dtype and expected.dtype == np.bool_:
        raise CheckFailed(f"{what}: got dtype {got.dtype}, expected bool")
    if not np.array_equal(got, expected):
        wrong = got != expected
        raise CheckFailed(f"{what} is wrong ({int(np.sum(wrong))} of "
                          f"{counted(wrong.size, 'entry', 'entries')} "
                          f"{noun(np.sum(wrong), 'differs', 'differ')})",
                          expected=expected, got=got, off=wrong)


def assert_matches_key(got: Any, expected: Any, *, dtype: Any = np.float64,
                       what: str = "the result",
                       parts: Sequence[str] | Callable[[int], str] = ()) -> None:
    """``got`` has the answer key's structure (the same tuple lengths, dict keys and shapes)
    and its values: close for floats, equal for booleans and integers. An empty tuple, a
    missing key or an extra element fails; it never compares nothing. A tuple's or a list's
    elements are named by ``parts`` (``("the output", "the weights")``, or a function of the
    index: ``"the output of step 0"``), as the contract names them: a student reads "the
    weights", not "(output, weights) [1]"."""
    if isinstance(expected, (tuple, list)):
        kind = type(expected).__name__
        if not isinstance(got, type(expected)) or len(got) != len(expected):
            size = (f"a {kind} of {len(got)}" if isinstance(got, type(expected))
                    else type(got).__name__)
            raise CheckFailed(f"{what} is {size}; the answer key returns a {kind} of "
                              f"{len(expected)}")
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_matches_key(g, e, dtype=dtype, what=_part(what, parts, i, len(expected)))
    elif isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            raise CheckFailed(f"{what} has keys {sorted(got) if isinstance(got, dict) else got!r}"
                              f", expected {sorted(expected)}")
        for key in expected:
            assert_matches_key(got[key], expected[key], dtype=dtype, what=f"{what} {key}")
    elif np.asarray(expected).dtype.kind in "biu":
        assert_equal(got, expected, what)
    else:
        assert_close(got, expected, dtype=dtype, what=what)


def _part(what: str, parts: Sequence[str] | Callable[[int], str], index: int, count: int
          ) -> str:
    """The name of element ``index`` of ``what`` (``count`` elements): its name in ``parts``,
    else its place in words ("part 2 of 2 of (output, weights)"), never a bare index."""
    if callable(parts):
        return parts(index)
    if len(parts) == count:
        return parts[index]
    return f"part {index + 1} of {count} of {what}"


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
