"""Finding the exercises: every module of the ``grader.problems`` package that declares
``EX = Exercise(...)``. The engine knows them by this search, as a plugin host knows its
plugins (by the package's name, never an import of it), so the exercise modules, which import
the engine's declarations, are above it and nothing in ``core`` imports them."""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .exercise import Exercise

PROBLEMS = "grader.problems"  # where the exercise modules are, one per exercise


def discover() -> dict[str, Exercise]:
    """Every exercise module's ``EX``, by name, in alphabetical order of the module. (An
    ``EX`` is known by what it has, an exercise's name and checks, not by its class: the
    catalog imports nothing of the engine, which asks it for the exercises.)"""
    package = importlib.import_module(PROBLEMS)
    found: dict[str, Exercise] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{PROBLEMS}.{info.name}")
        exercise = getattr(module, "EX", None)
        if getattr(exercise, "name", None) != info.name or not hasattr(exercise, "checks"):
            raise TypeError(f"grader/problems/{info.name}.py must define EX = Exercise("
                            f"{info.name!r}, ...)")
        found[exercise.name] = exercise
    return found
