"""How far an answer moves: its parts (``parts``), their entries (``Entries``), and the
three comparisons ``grader.core.vacuous`` judges answers by, each next to the reference's
answer to the same call: whether a part varies enough to tell (``tells``), holds one repeated
value (``constant``), and whether two parts are as good as the same where the reference's two
differ (``same``). Entries that are -inf, inf or NaN count by where they are, never as a
distance: no spread or gap is infinite.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

# A part ignores its input where it moves less than this fraction of what the reference's part
# moves (from one entry to the next, from an argument, from one call to another). Far above
# rounding (1e-16 in float64, 6e-8 in float32: a right answer moves as the reference's does,
# to within them) and far below how much any honest answer in the zoo moves; noise that is a
# thousandth of the answer's own change is no use of the input.
TOLERANCE = 1e-3
# How much the reference's part must move (relative to its size, at least 1) to tell: well
# clear of rounding, so the tolerance above is a fraction of a real change.
FLOOR = 1e-2


def parts(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, np.ndarray]]:
    """The numeric arrays of two entries or more in a result or in arguments, each with its
    place: dicts by key, tuples and lists of arrays one by one, a list of numbers as one
    array, a tensor as its NumPy copy."""
    if isinstance(value, dict):
        for key in sorted(value, key=str):
            yield from parts(value[key], (*path, str(key)))
    elif isinstance(value, (list, tuple)) and any(
            isinstance(v, (dict, list, tuple, np.ndarray)) or hasattr(v, "detach")
            for v in value):
        for index, item in enumerate(value):
            yield from parts(item, (*path, index))
    else:
        if hasattr(value, "detach"):  # a torch tensor (a reference's answer)
            try:
                value = value.detach().cpu().numpy()
            except Exception:
                return
        try:
            array = np.asarray(value)
        except Exception:  # a ragged list, an object that will not convert
            return
        if array.dtype.kind in "biuf" and array.size >= 2:
            yield path, array


class Entries:
    """An array's entries as float64 halves (so no difference of two overflows) and the kind
    of each: 0 finite, 1 NaN, 2 +inf, 3 -inf; with how far apart its finite entries are
    (``spread``, 0 with fewer than two), the largest of them in size (``size``, at least
    1/2: the halves of ``max(1, |x|)``) and whether every entry is of one kind
    (``uniform``)."""

    __slots__ = ("values", "kinds", "finite", "spread", "size", "uniform")

    def __init__(self, array: np.ndarray):
        self.values = np.asarray(array, dtype=np.float64) / 2
        self.finite = bool(np.isfinite(self.values).all())
        if self.finite:
            self.kinds = np.zeros(self.values.shape, np.int8)
            finite = self.values
        else:
            self.kinds = np.select([np.isnan(self.values), self.values == np.inf,
                                    self.values == -np.inf], [1, 2, 3], 0).astype(np.int8)
            finite = self.values[self.kinds == 0]
        self.spread = float(finite.max() - finite.min()) if finite.size else 0.0
        self.size = max(0.5, float(np.abs(finite).max()) if finite.size else 0.5)
        self.uniform = self.finite or bool((self.kinds == self.kinds.flat[0]).all())

    @property
    def shape(self) -> tuple[int, ...]:
        return self.values.shape

    def gap(self, other: Entries) -> float:
        """The largest difference between the entries finite in both (same shape)."""
        if self.finite and other.finite:
            return float(np.abs(self.values - other.values).max())
        both = (self.kinds == 0) & (other.kinds == 0)
        if not both.any():
            return 0.0
        return float(np.abs(self.values[both] - other.values[both]).max())

    def kinds_differ(self, other: Entries) -> bool:
        return not (self.finite and other.finite) and bool((self.kinds != other.kinds).any())


def tells(reference: Entries) -> bool:
    """The reference's part varies: in where it holds -inf, inf or NaN, or beyond ``FLOOR``."""
    return not reference.uniform or reference.spread >= FLOOR * reference.size


def constant(got: Entries, reference: Entries) -> bool:
    """``got`` holds one repeated value, next to a ``reference`` that ``tells``: every entry of
    one kind, its finite ones within ``TOLERANCE`` of how far apart the reference's are."""
    return got.uniform and got.spread <= TOLERANCE * reference.spread


def same(got: tuple[Entries, Entries], want: tuple[Entries, Entries]) -> bool | None:
    """Whether the two parts ``got`` are as good as the same where the reference's two
    ``want`` differ (in where they hold -inf, inf or NaN, or beyond ``FLOOR``); None where they
    do not differ (or have other shapes), so nothing is said."""
    (a, b), (x, y) = got, want
    if x.shape != y.shape or not (
            x.kinds_differ(y) or x.gap(y) >= FLOOR * max(x.size, y.size)):
        return None
    if a.shape != b.shape or a.kinds_differ(b):
        return False
    return a.gap(b) <= TOLERANCE * x.gap(y)


def zeroed(value: Any) -> Any:
    """``value`` with every finite entry of its float arrays set to 0 (the rest as it is)."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return np.where(np.isfinite(value), 0, value).astype(value.dtype)
    if isinstance(value, dict):
        return {key: zeroed(item) for key, item in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(zeroed(item) for item in value))
    if isinstance(value, (list, tuple)):
        return type(value)(zeroed(item) for item in value)
    return value
