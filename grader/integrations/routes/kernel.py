"""Grading from inside a Jupyter kernel: the ``%%exercise`` cell magic and ``score()``.

``%load_ext grader.integrations.routes.kernel`` registers the magic. An answer cell that starts with
``%%exercise NAME`` is saved as ``NAME.py`` in a folder private to this kernel, then run so the
student can experiment. ``score(NAME)`` grades that file with ``engine.grade_submission``: the
same workers, checks, course and Hypothesis profile as ``python -m grader grade``, so a notebook
earns what the same code in files earns. The course is ``$ATTENTION_KIT_COURSE``, else the
kit's ``course.toml``. The answer key is used where it is present (``$ATTENTION_KIT_KEY``, else
the kit's ``solutions/``); a student's copy of the kit has none, and the visible checks still
run.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import io
import linecache
import os
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from ...core.course import EXERCISES_BY_NAME, load
from ...sandbox import reader
from ...sandbox.isolation import TORCH_CALLS, Limits

KEY_ENV = "ATTENTION_KIT_KEY"
# The grader's limit for one exercise, as `python -m grader grade` uses it, so a slow or looping
# answer scores the same in both. A test cell grades one exercise; its cell timeout leaves room
# for the limit, the calls stopped at their own limit (which it leaves out), the answer key's
# worker and the kernel's own overhead.
EXERCISE_TIMEOUT = Limits().timeout
CELL_TIMEOUT = int(3 * EXERCISE_TIMEOUT + max(
    e.stopped_seconds(Limits()) for e in EXERCISES_BY_NAME().values()))
# Seconds an answer cell's own top-level code may run in the kernel (definitions take less
# than one); past it the cell stops with TimeoutError. The file was saved first, so it is
# graded all the same.
RUN_TIMEOUT = 30.0
FILE_HEADER = "# {name}.py, saved by %%exercise {name}"
HYPOTHESIS_STORAGE_ENV = "HYPOTHESIS_STORAGE_DIRECTORY"


class _Kernel:
    """This kernel's saved answers and the grading results of the current ones."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="attention-kit-notebook-"))
        atexit.register(shutil.rmtree, self.folder, ignore_errors=True)
        self.results: dict[tuple[str, str, str], Any] = {}


_KERNEL: _Kernel | None = None


def _kernel() -> _Kernel:
    global _KERNEL
    if _KERNEL is None:
        _KERNEL = _Kernel()
    return _KERNEL


def functions() -> set[str]:
    """The names of every exercise's functions: what an answer cell may use of another's."""
    return {f for spec in EXERCISES_BY_NAME().values() for f in spec.functions}


def _sibling_imports(exercise: str, defined: set[str], used: set[str]) -> list[str]:
    """``from .x import f`` for each earlier exercise's function the cell uses (``used``) but
    not defines at its top level (``defined``)."""
    imports = []
    for spec in EXERCISES_BY_NAME().values():
        wanted = [f for f in spec.functions if f in used and f not in defined]
        if spec.name != exercise and wanted:
            imports.append(f"from .{spec.name} import {', '.join(wanted)}")
    return imports


def exercise_file(exercise: str, cell: str,
                  names: tuple[set[str], set[str]] | None = None) -> str:
    """The file an answer cell stands for: one line of imports, then the cell's lines.

    The cell's line ``n`` (the magic being line 1) is line ``n`` of the file, so the grader's
    feedback points at the lines the student sees. ``names``: of the exercises' functions,
    those the cell defines and those it uses, as the reader found them for a grading process
    (``readers.cell_names``: it parses no student's text itself); here, in the kernel that
    runs the cell anyway, the cell is parsed in this process. A cell that does not parse gets
    no imports: the file will not import, and the grader says so.
    """
    defined, used = names if names is not None else map(set, reader.names(cell, functions()))
    imports = _sibling_imports(exercise, defined, used)
    header = FILE_HEADER.format(name=exercise)
    return ("; ".join(imports) + "  " + header if imports else header) + "\n" + cell


def _without_sibling_imports(tree: ast.Module) -> ast.Module:
    """In the kernel the earlier exercises are plain names: drop ``from .x import ...``."""
    for index, node in enumerate(tree.body):
        if (isinstance(node, ast.ImportFrom) and node.level == 1
                and node.module in EXERCISES_BY_NAME()):
            tree.body[index] = ast.copy_location(ast.Pass(), node)
    return tree


@contextlib.contextmanager
def _time_limit(seconds: float):
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise TimeoutError(
            f"the cell ran for more than {seconds:g} s and was stopped; it was saved and will "
            f"be graded all the same, though loading it is one call of the grader's, stopped "
            f"past {Limits().call:g} s of CPU time ({Limits().call * TORCH_CALLS:g} s in a "
            "torch exercise), and then the exercise is not graded"
        )

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_exercise_cell(exercise: str, cell: str, namespace: dict[str, Any]) -> Path:
    """Save an answer cell as the exercise's file, then run it in ``namespace``."""
    if exercise not in EXERCISES_BY_NAME():
        names = ", ".join(EXERCISES_BY_NAME())
        raise ValueError(f"%%exercise needs one of {names}, got {exercise!r}")
    path = _kernel().folder / f"{exercise}.py"
    text = exercise_file(exercise, cell)
    path.write_text(text)
    filename = f"<{exercise} answer cell>"
    source = "\n" + cell  # line numbers as in the file and the cell
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    code = compile(_without_sibling_imports(ast.parse(source, filename)), filename, "exec")
    with _time_limit(RUN_TIMEOUT):
        exec(code, namespace)
    return path


def _key_folder() -> Path:
    from ...core import engine

    return Path(os.environ.get(KEY_ENV) or engine.DEFAULT_KEY)


def _result(exercise: str) -> Any:
    from ...core import engine

    kernel = _kernel()
    path = kernel.folder / f"{exercise}.py"
    text = path.read_text() if path.is_file() else ""
    key = _key_folder()
    cached = kernel.results.get((exercise, text, str(key)))
    if cached is None:
        captured = io.StringIO()  # nbgrader gives no credit to a test cell that wrote to stderr
        with contextlib.redirect_stderr(captured):
            cached = engine.grade_submission(
                kernel.folder, course=load(), exercises=[exercise], key_folder=key,
                limits=Limits(timeout=EXERCISE_TIMEOUT),
            )
        if captured.getvalue():
            print(captured.getvalue().rstrip())
        kernel.results = {k: v for k, v in kernel.results.items() if k[0] != exercise}
        kernel.results[(exercise, text, str(key))] = cached
    return cached


def score(exercise: str, *, hidden: bool = False) -> int:
    """Grade the saved answer to ``exercise``; print the feedback, return the points.

    ``hidden=False``: the checks whose code students see; ``hidden=True``: the answer-key
    comparisons, which need the key (an error without it, so the cell earns nothing).
    """
    if exercise not in EXERCISES_BY_NAME():
        raise ValueError(f"unknown exercise {exercise!r}")
    if not (_kernel().folder / f"{exercise}.py").is_file():
        print(f"No answer saved for {exercise}: run its answer cell, which must start with "
              f"`%%exercise {exercise}`.")
    result = _result(exercise)
    if hidden and not result.key_present:
        raise RuntimeError(
            f"the answer key is not here ({_key_folder()}): hidden checks run on the "
            f"instructor's side; set {KEY_ENV} to the kit's solutions/ folder"
        )
    graded = result.results[exercise]
    checks = [c for c in graded.checks if c.hidden == hidden]
    points = 0 if graded.error else sum(c.points for c in checks)
    later = result.hidden_points_skipped + result.hidden_bonus_points_skipped  # no key here
    print(feedback_text(exercise, graded, checks, points, later))
    return points


def feedback_text(exercise: str, graded: Any, checks: list[Any], points: float,
                  later: float = 0) -> str:
    """What a test cell prints: ``graded`` (an ExerciseResult) on ``checks``, its visible or
    its hidden ones, worth ``points``; ``later``: the points of the hidden checks that did not
    run here (no answer key), said under the total. The isolated autograde writes the same
    text (it runs them all)."""
    from ...core.plural import counted, noun

    top = sum(c.max_points for c in checks)
    lines = [f"{exercise}: {points} / {top}"]
    if later:
        lines.append(f"({counted(later, 'more point')} {noun(later, 'comes', 'come')} from the "
                     "hidden tests, run when your notebook is graded.)")
    if graded.error:
        return "\n".join(lines + [f"Not graded: {graded.error}"])
    if graded.not_implemented:
        return "\n".join(lines + ["Not implemented yet."])
    for c in checks:
        mark = "pass" if c.passed else "FAIL"
        lines.append(f"  [{mark}] {c.prop} ({c.points}/{c.max_points})")
        if not c.passed:
            lines += ["         " + line for line in c.feedback.splitlines()[1:]]
    return "\n".join(lines)


def load_ipython_extension(ipython: Any) -> None:
    from IPython.core.magic import register_cell_magic

    from ...core import engine  # noqa: F401  (one torch thread before any student code runs)

    # nbgrader runs the notebook in its folder (autograded/<student>/...), which
    # generate_feedback copies to the student: keep Hypothesis's storage and the bytecode of
    # anything imported from there out of it.
    os.environ.setdefault(HYPOTHESIS_STORAGE_ENV, str(_kernel().folder / ".hypothesis"))
    sys.dont_write_bytecode = True

    @register_cell_magic("exercise")
    def exercise(line: str, cell: str) -> None:
        """%%exercise NAME: save this cell as NAME.py for grading, then run it."""
        run_exercise_cell(line.strip(), cell, ipython.user_ns)
