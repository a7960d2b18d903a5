"""The exercises, one module each: everything the kit knows about an exercise lives in its
module (declaration, reference, strategies, checks visible and hidden, misconceptions with their
probes, worker operations). Nothing else in the kit names an exercise: it asks ``discover()``.

To add an exercise, add a module here that defines ``EX = Exercise(...)`` (see softmax.py), its
answer key in ``solutions/`` and, optionally, an entry in ``course.toml``.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: ``frameworks`` runs before Hypothesis is imported
    from ..core.exercise import Exercise


def discover() -> dict[str, Exercise]:
    """Every exercise module's ``EX``, by name, in alphabetical order of the module."""
    from ..core.exercise import Exercise

    found: dict[str, Exercise] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        exercise = getattr(module, "EX", None)
        if not isinstance(exercise, Exercise) or exercise.name != info.name:
            raise TypeError(f"grader/problems/{info.name}.py must define EX = Exercise("
                            f"{info.name!r}, ...)")
        found[exercise.name] = exercise
    return found


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
