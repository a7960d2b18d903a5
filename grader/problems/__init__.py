"""The exercises, one module each: everything the kit knows about an exercise lives in its
module (declaration, reference, strategies, checks visible and hidden, misconceptions with their
probes, worker operations). Nothing else in the kit names an exercise: it asks ``discover()``.

To add an exercise, add a module here that defines ``EX = Exercise(...)`` (see softmax.py), its
answer key in ``solutions/`` and, optionally, an entry in ``course.toml``.
"""

from __future__ import annotations

import importlib
import pkgutil

from ..core.exercise import Exercise


def discover() -> dict[str, Exercise]:
    """Every exercise module's ``EX``, by name, in alphabetical order of the module."""
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
