"""A count and its noun, singular or plural as the count asks: "1 check failing", "3 checks
failing", "1.5 points"; never "check(s)" or "entr(y/ies)"."""

from __future__ import annotations


def noun(count: float, singular: str, plural: str | None = None) -> str:
    """``singular`` for a count of exactly one, else ``plural`` (``singular`` + "s" unless
    given: ``noun(n, "entry", "entries")``)."""
    return singular if count == 1 else plural or f"{singular}s"


def counted(count: float, singular: str, plural: str | None = None) -> str:
    """``count`` and its noun: ``counted(1, "point")`` is "1 point", ``counted(2.5, "point")``
    "2.5 points" (a whole float prints as an int: "3 points", not "3.0 points")."""
    shown = int(count) if float(count).is_integer() else count
    return f"{shown} {noun(count, singular, plural)}"
