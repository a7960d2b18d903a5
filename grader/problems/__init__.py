"""The exercises, one module each: everything the kit knows about an exercise lives in its
module (declaration, reference, strategies, checks visible and hidden, misconceptions with their
probes, worker operations). Nothing else in the kit names an exercise: it asks ``discover()``.

To add an exercise, add a module here that defines ``EX = Exercise(...)`` (see softmax.py), its
answer key in ``solutions/``, its zoo entries and, optionally, an entry in ``course.toml``, then
run ``make regenerate`` (docs/contributing.md, "Adding an exercise"). The engine finds the
modules here by the package's name (``grader.core.catalog``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: ``frameworks`` runs before Hypothesis is imported
    from ..core.exercise import Exercise


def discover() -> dict[str, Exercise]:
    """Every exercise module's ``EX``, by name (``grader.core.catalog.discover``)."""
    from ..core.catalog import discover as found

    return found()


def frameworks(names: list[str]) -> set[str] | None:
    """The frameworks the exercises ``names`` declare, read from their modules' text without
    importing them (the grading process starts the zygotes it needs before it imports torch);
    None when one cannot be read that way."""
    found = set()
    for name in names:
        folder = Path(__path__[0])
        sources = [folder / f"{name}.py", *sorted((folder / name).glob("*.py"))]
        text = "".join(p.read_text() for p in sources if p.is_file())
        declared = re.search(r"""Exercise\(\s*["']""" + re.escape(name)
                             + r"""["'].{0,500}?framework=["'](\w+)["']""", text, re.S)
        if declared is None:
            return None
        found.add(declared[1])
    return found
