"""The rubric an instructor edits: ``course.toml`` at the kit's root (or ``--course FILE``).

Per exercise: ``enabled``, ``track`` (``core`` counts toward the score; ``bonus`` is graded
when its file is present and reported apart), ``points`` (the exercise's checks are scaled
to them) and ``order`` (where it is listed). For the course: ``examples`` per property,
``hints`` (misconception hints in the feedback), the comparison ``tolerances`` per dtype and
``similarity``, the score from which the class report flags two files as alike.
An exercise the file does not mention keeps its module's defaults. Every route (``grade``,
``batch``, Gradescope, the notebooks, the handout) reads the same file.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .plural import noun

if TYPE_CHECKING:  # not imported: the course is read without Hypothesis (pytest's collection)
    from .exercise import Exercise

KIT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_COURSE = KIT_ROOT / "course.toml"
DEFAULT_KEY = KIT_ROOT / "solutions"  # the answer key: the hidden checks run only next to it
COURSE_ENV = "ATTENTION_KIT_COURSE"  # where a notebook kernel finds the course file
SECRET_FILE = ".course-secret"  # next to the answer key: seeds the hidden checks' inputs
SECRET_ENV = "ATTENTION_KIT_SECRET"  # overrides the file (the kit's own tests fix it)
DEFAULT_TOLERANCES = {"float64": (1e-7, 1e-9), "float32": (1e-4, 1e-5)}
COURSE_KEYS = {"examples", "hints", "tolerances", "similarity"}
DEFAULT_SIMILARITY = 0.7  # the class report flags a pair of files this similar, or more
EXERCISE_KEYS = {"enabled", "track", "points", "order"}
TRACKS = ("core", "bonus")


class CourseError(ValueError):
    """The course file cannot be used; the message says which line of thought to fix."""


@dataclass(frozen=True)
class Setting:
    exercise: Exercise
    enabled: bool
    track: str
    points: float
    order: float


@dataclass(frozen=True)
class Course:
    path: Path | None
    settings: tuple[Setting, ...]
    examples: int = 10
    hints: bool = True
    tolerances: dict[str, tuple[float, float]] = field(
        default_factory=lambda: dict(DEFAULT_TOLERANCES))
    similarity: float = DEFAULT_SIMILARITY

    # -- which exercises ------------------------------------------------------------------------
    def exercises(self, track: str | None = None) -> list[Exercise]:
        """The enabled exercises in order, of one track or of both."""
        return [s.exercise for s in self.settings
                if s.enabled and (track is None or s.track == track)]

    def names(self, track: str | None = None) -> list[str]:
        return [e.name for e in self.exercises(track)]

    def setting(self, name: str) -> Setting:
        for s in self.settings:
            if s.exercise.name == name:
                return s
        raise KeyError(name)

    def track(self, name: str) -> str:
        return self.setting(name).track

    def points(self, name: str) -> float:
        return self.setting(name).points

    def total(self, track: str = "core") -> float:
        return number(sum(s.points for s in self.settings if s.enabled and s.track == track))

    # -- how many points each check is worth -----------------------------------------------------
    def check_points(self, exercise: Exercise) -> dict[str, float]:
        """Each check's points, scaled so the exercise is worth its course points.

        Visible and hidden checks are scaled as two groups whose default sizes come from the
        declaration (the exercise's points minus the visible checks'), so a copy of the kit
        without the hidden checks still gives each visible check the same points.
        """
        wanted = self.points(exercise.name)
        if wanted == exercise.points:
            return {c.name: c.points for c in exercise.checks}
        visible = [c for c in exercise.checks if not c.hidden]
        hidden = [c for c in exercise.checks if c.hidden]
        visible_default = sum(c.points for c in visible)
        group_visible, group_hidden = apportion(
            [visible_default, exercise.points - visible_default], wanted)
        result: dict[str, float] = {}
        for group, total in ((visible, group_visible), (hidden, group_hidden)):
            if group:
                result.update(zip((c.name for c in group),
                                  apportion([c.points for c in group], total)))
        return result


def number(value: float) -> float:
    """Points as they are shown and stored: an int when whole, else two decimals."""
    rounded = round(float(value), 2)
    return int(rounded) if rounded == int(rounded) else rounded


def apportion(weights: list[float], total: float) -> list[float]:
    """Split ``total`` in proportion to ``weights``, in hundredths, summing to ``total`` exactly
    (largest remainders first; ties go to the earlier weight)."""
    cents = round(total * 100)
    whole = sum(weights)
    if whole <= 0:
        return [0] * len(weights)
    shares = [w * cents / whole for w in weights]
    floors = [math.floor(s) for s in shares]
    order = sorted(range(len(weights)), key=lambda i: (-(shares[i] - floors[i]), i))
    for i in order[: cents - sum(floors)]:
        floors[i] += 1
    return [number(f / 100) for f in floors]


@cache
def EXERCISES_BY_NAME() -> dict[str, Exercise]:  # noqa: N802  (a constant, computed once)
    from .catalog import discover

    return discover()


def _require(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise CourseError(f"{where}: {message}")


def parse(data: dict[str, Any], path: Path | None = None,
          known: Mapping[str, Any] | None = None) -> Course:
    """The course ``data`` describes. ``known``: the exercises by name (default: every module
    of ``grader.problems``); anything with an Exercise's name, track, points and order will do
    (the pytest plugin lists checks from the modules' source, without importing them)."""
    where = str(path) if path else "course"
    known = EXERCISES_BY_NAME() if known is None else known
    unknown = set(data) - {"course", "exercises"}
    _require(not unknown, where, f"unknown {noun(len(unknown), 'table')} {sorted(unknown)}; "
             "expected [course] and "
             "[exercises.NAME]")
    course = data.get("course", {})
    _require(isinstance(course, dict), where, "[course] must be a table")
    _require(not set(course) - COURSE_KEYS, where,
             f"unknown [course] {noun(len(set(course) - COURSE_KEYS), 'key')} "
             f"{sorted(set(course) - COURSE_KEYS)}")
    examples = course.get("examples", 10)
    _require(type(examples) is int and examples >= 1, where,
             "course.examples must be a positive integer")
    hints = course.get("hints", True)
    _require(type(hints) is bool, where, "course.hints must be true or false")
    similarity = course.get("similarity", DEFAULT_SIMILARITY)
    _require(isinstance(similarity, (int, float)) and not isinstance(similarity, bool)
             and 0 < similarity <= 1, where, "course.similarity must be a number in (0, 1]")
    tolerances = dict(DEFAULT_TOLERANCES)
    for dtype, value in course.get("tolerances", {}).items():
        _require(dtype in DEFAULT_TOLERANCES and isinstance(value, dict)
                 and set(value) == {"rtol", "atol"}, where,
                 f"course.tolerances.{dtype} must be one of {sorted(DEFAULT_TOLERANCES)} with "
                 "rtol and atol")
        rtol, atol = value["rtol"], value["atol"]
        _require(all(isinstance(v, (int, float)) and v >= 0 for v in (rtol, atol)), where,
                 f"course.tolerances.{dtype}: rtol and atol must be non-negative numbers")
        tolerances[dtype] = (float(rtol), float(atol))
    table = data.get("exercises", {})
    _require(isinstance(table, dict), where, "[exercises] must hold one table per exercise")
    settings = []
    for name, entry in table.items():
        _require(name in known, where,
                 f"unknown exercise {name!r} (the grader has {', '.join(sorted(known))})")
        _require(isinstance(entry, dict) and not set(entry) - EXERCISE_KEYS, where,
                 f"exercises.{name}: keys are {sorted(EXERCISE_KEYS)}")
        exercise = known[name]
        enabled = entry.get("enabled", True)
        track = entry.get("track", exercise.track)
        points = entry.get("points", exercise.points)
        _require(type(enabled) is bool, where, f"exercises.{name}.enabled must be true or false")
        _require(track in TRACKS, where, f"exercises.{name}.track must be one of {TRACKS}")
        _require(isinstance(points, (int, float)) and not isinstance(points, bool)
                 and points > 0 and round(points * 100) == points * 100, where,
                 f"exercises.{name}.points must be a positive number (hundredths at most)")
        order = entry.get("order", exercise.order)
        _require(isinstance(order, (int, float)) and not isinstance(order, bool), where,
                 f"exercises.{name}.order must be a number")
        settings.append(Setting(exercise, enabled, track, number(points), order))
    listed = {s.exercise.name for s in settings}
    settings += [Setting(e, True, e.track, e.points, e.order)
                 for name, e in known.items() if name not in listed]
    settings.sort(key=lambda s: (s.order, s.exercise.name))
    return Course(path, tuple(settings), examples, hints, tolerances, float(similarity))


def load(path: str | os.PathLike[str] | None = None,
         known: Mapping[str, Any] | None = None) -> Course:
    """The course in ``path``; without one, ``$ATTENTION_KIT_COURSE`` or the kit's
    ``course.toml``; with neither, every exercise's own defaults (``known``: see ``parse``)."""
    chosen = Path(path) if path else Path(os.environ.get(COURSE_ENV) or DEFAULT_COURSE)
    if not chosen.is_file():
        if path or os.environ.get(COURSE_ENV):
            raise CourseError(f"{chosen}: no such course file")
        return parse({}, known=known)
    try:
        data = tomllib.loads(chosen.read_text())
    except tomllib.TOMLDecodeError as error:
        raise CourseError(f"{chosen}: {error}") from None
    return parse(data, chosen.resolve(), known)


def course_secret(key_folder: Path) -> str:
    """The course secret the hidden checks draw their inputs from: ``$ATTENTION_KIT_SECRET``
    when set, else ``<answer key>/.course-secret``, made on first use. It never leaves the
    instructor's side (the handout has no answer key folder); the Gradescope bundle carries it.
    """
    if SECRET_ENV in os.environ:
        return os.environ[SECRET_ENV]
    path = Path(key_folder) / SECRET_FILE
    if not path.is_file():
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_hex(16) + "\n")
    return path.read_text().strip()
