"""A grading run: one course, answer key, limits and degree of parallelism, set up once, then
any number of submissions graded, each to a typed record (``results.SubmissionResult``).

Every route grades through one: ``grade`` (one submission, its exercises side by side),
``batch`` (one grader process forked per submission, each grading through the run it was
forked with), Gradescope (one upload), nbgrader (a batch in a process that cannot see the
course) and the pytest plugin. What a run sets up, each once, before it grades:

- the zygotes every worker is forked from, and the reader that reads the files, started first
  so that their start-up overlaps with this process's imports (torch's above all);
- for one submission at a time: the examples a previous run drew, the course's plan (each
  check's questions, ``one_pass``) and how long each exercise took (``replay_store.load_cache``,
  ``one_pass.load``, ``lanes.load_seconds``; ``close`` keeps them for the next run);
- for a class: the zygotes told they fork a class's workers, the answer key graded once (the
  graders forked after it start with its modules imported, the course's plan made, and
  Hypothesis's strategies and torch's kernels warm; grading is seeded, so what it warms changes
  no result), huge pages for
  the forks and the cgroups of an earlier run swept;
- the course's checks imported and ``gc.freeze``: no collection walks what is loaded again
  (nor, in a fork, copies its pages);
- the answer key protected from the workers (``submission.protect_key``).

The engine (``grader.core.engine``) is imported only once the zygotes are started.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..sandbox import isolation
from ..sandbox.isolation import Limits
from .course import DEFAULT_KEY, Course, load

if TYPE_CHECKING:
    from .results import ExerciseResult, SubmissionResult


class GradingRun:
    """``course`` (a Course, a course file, or None for the kit's), the answer ``key``'s folder
    (None: grade as a student would, on the public checks), the workers' ``limits`` and
    ``jobs``: exercises side by side for one submission (default ``lanes.default_lanes()``),
    submissions at once for a class (default: the CPUs). Use it as a context manager, or call
    ``close``."""

    def __init__(self, course: Course | str | os.PathLike[str] | None = None,
                 key: str | os.PathLike[str] | None = DEFAULT_KEY, limits: Limits = Limits(),
                 jobs: int | None = None):
        self._course = course
        self.key = Path(key) if key is not None else None
        self.limits = limits
        self.jobs = jobs
        self._caches = False
        self._class = False
        self._plan = False  # make the course's plan (``one_pass``): a run that reuses it

    @property
    def course(self) -> Course:
        """The course, loaded on first use (after the zygotes start: it imports the checks)."""
        if not isinstance(self._course, Course):
            self._course = load(self._course)
        return self._course

    # -- set-up -----------------------------------------------------------------------------
    def start(self, exercises: list[str] | None = None, *, caches: bool = False) -> GradingRun:
        """Set up for submissions graded one at a time here: the zygotes of ``exercises``'
        frameworks (all without), and with ``caches`` the examples and timings of the run
        before (``close`` saves them)."""
        from ..problems import frameworks

        isolation.start_zygote(frameworks(exercises) if exercises else None)
        if caches:
            from . import lanes, replay_store

            replay_store.load_cache()  # the examples a previous run drew (grader/core/replay.py)
            lanes.load_seconds()  # how long each exercise took: the longest start first
            self._caches = True
        from . import engine  # noqa: F401  (imported now: frozen with the rest)

        self.course.exercises()  # the checks imported, and with them all that grading reads
        if caches and self._planned() is not None:
            from . import one_pass

            one_pass.load(*self._planned())  # the course's plan a previous run made
            self._plan = True
        gc.freeze()
        return self

    def _planned(self) -> tuple | None:
        """What the course's plan is made for (``one_pass``): the course, the key, its secret
        and the devices; None without a key (the plan is the key's to make)."""
        from .course import course_secret
        from .engine import available_devices

        if self.key is None or not all((self.key / f"{n}.py").is_file()
                                       for n in self.course.names("core")):
            return None
        return self.course, self.key, course_secret(self.key), available_devices()

    def start_class(self) -> GradingRun:
        """Set up for a class: a grader process is forked from here for each submission."""
        from ..sandbox import cgroups
        from ..sandbox.zygote import huge_pages

        isolation.start_zygote(many=True)
        from . import engine  # noqa: F401  (imported now: frozen with the rest)

        self.course.exercises()
        key = self.key if self.key is not None and self.key.is_dir() else None
        self._plan = True  # every grader forked from here reads it
        if key is not None:  # warm: see the module docstring
            with contextlib.suppress(Exception):
                self.grade(key, lanes=1)
        gc.freeze()  # the graders only read what is loaded now: no collection copies its pages
        huge_pages()  # each grader a fork of this: a third of the fork's cost
        cgroups.sweep()
        if key is not None:
            from .submission import protect_key

            protect_key(key)
        self._class = True
        return self

    # -- grading ----------------------------------------------------------------------------
    def grade(self, path: str | os.PathLike[str], *, exercises: list[str] | None = None,
              lanes: int | None = None,
              progress: Callable[[ExerciseResult], None] | None = None,
              visible: Callable[[SubmissionResult], None] | None = None) -> SubmissionResult:
        """Grade the folder ``path`` (``engine.grade_submission``): the course's exercises or
        ``exercises``, ``lanes`` of them side by side (default: ``jobs`` for a run of one
        submission at a time, one in a class's grader); every visible phase first, given to
        ``visible``, then every hidden one (``grader.core.phases``)."""
        from . import engine

        if lanes is None:
            if self._class:
                lanes = 1
            else:
                from .lanes import default_lanes

                lanes = self.jobs if self.jobs is not None else default_lanes()
        return engine.grade_submission(path, course=self.course, key_folder=self.key,
                                       limits=self.limits, exercises=exercises, jobs=lanes,
                                       progress=progress, visible=visible, plan=self._plan)

    # -- the end ----------------------------------------------------------------------------
    def close(self) -> None:
        """Keep the caches for the next run (``start(caches=True)``); for a class, sweep the
        cgroups of graders that were killed before they could remove theirs."""
        if self._caches:
            from . import lanes, replay_store

            replay_store.save_cache()
            lanes.save_seconds()
            if self._planned() is not None:
                from . import one_pass

                one_pass.save(*self._planned())
            self._caches = False
        if self._class:
            from ..sandbox import cgroups

            cgroups.sweep()

    def __enter__(self) -> GradingRun:
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is None:
            self.close()
