"""The kit as one nbgrader assignment: building the notebook, and grading its cells in the kernel.

Building (``make nbgrader``, ``python -m grader.notebook build COURSE``) writes an nbgrader course
folder: ``nbgrader_config.py`` and ``source/attention/attention.ipynb``, made from
``solutions/`` and the checks' metadata, byte for byte the same on every run.

In the kernel (``%load_ext grader.notebook``) an answer cell starts with ``%%exercise NAME``.
The magic saves the cell as ``NAME.py`` in a folder private to this kernel, then runs it so
the student can experiment. The test cells below it call ``score(NAME)``, which grades that
file with ``engine.grade_submission``: the same workers, checks and Hypothesis profile as
``python -m grader grade``, so a notebook earns what the same code in files earns. The
answer key is used where it is present (``$ATTENTION_KIT_KEY``, else the kit's
``solutions/``); a student's copy of the kit has none, and its visible checks still run.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import io
import json
import linecache
import os
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from .exercises import BY_NAME, EXERCISE_NAMES, EXERCISES
from .isolation import Limits

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENT = "attention"
KEY_ENV = "ATTENTION_KIT_KEY"
# The grader's limit for one exercise, as `python -m grader grade` uses it, so a slow or looping
# answer scores the same in both. A test cell grades one exercise; its cell timeout leaves room
# for the limit, the answer key's worker and the kernel's own overhead.
EXERCISE_TIMEOUT = Limits().timeout
CELL_TIMEOUT = int(3 * EXERCISE_TIMEOUT)
# Seconds an answer cell's own top-level code may run in the kernel (definitions take less
# than one); past it the cell stops with TimeoutError. The file was saved first, so it is
# graded all the same.
RUN_TIMEOUT = 30.0
FILE_HEADER = "# {name}.py, saved by %%exercise {name}"


# -- building the notebook ----------------------------------------------------------------------
def _source_lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines:
        lines[-1] = lines[-1].rstrip("\n")
    return lines


def _markdown(cell_id: str, text: str) -> dict[str, Any]:
    return {
        "cell_type": "markdown",
        "id": cell_id,
        "metadata": {
            "deletable": False,
            "editable": False,
            "nbgrader": _nbgrader(cell_id, locked=True),
        },
        "source": _source_lines(text),
    }


def _code(cell_id: str, text: str, nbgrader: dict[str, Any], locked: bool) -> dict[str, Any]:
    metadata: dict[str, Any] = {"nbgrader": nbgrader}
    if locked:
        metadata = {"deletable": False, "editable": False, **metadata}
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": cell_id.replace("_", "-"),
        "metadata": metadata,
        "outputs": [],
        "source": _source_lines(text),
    }


def _nbgrader(grade_id: str, *, locked: bool = False, solution: bool = False,
              points: int | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "grade": points is not None,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if points is not None:
        meta["points"] = points
    return meta


def split_solution(text: str) -> tuple[str, str, list[str]]:
    """A solution file as ``(summary, cell body, relative imports)``.

    The module docstring becomes the exercise's introduction and the relative imports of other
    exercises (``from .softmax import softmax``) are left out of the cell: in the notebook the
    names come from the earlier cells, and ``%%exercise`` puts the imports back in the file.
    """
    tree = ast.parse(text)
    summary = ast.get_docstring(tree) or ""
    lines = text.splitlines()
    drop: set[int] = set()  # line numbers, from 1; a dropped import takes the blanks above it
    imports = []
    for node in tree.body:
        first, last = node.lineno, node.end_lineno or node.lineno
        if node is tree.body[0] and summary:
            drop.update(range(first, last + 1))
        elif isinstance(node, ast.ImportFrom) and node.level == 1 and node.module in BY_NAME:
            while first > 1 and not lines[first - 2].strip():
                first -= 1
            drop.update(range(first, last + 1))
            imports.append(ast.get_source_segment(text, node) or "")
    kept = [line for number, line in enumerate(lines, 1) if number not in drop]
    return summary, "\n".join(kept).strip("\n") + "\n", imports


def _checks(exercise: str) -> tuple[list[Any], list[Any]]:
    from .registry import checks_for

    checks = checks_for(exercise)
    return [c for c in checks if not c.hidden], [c for c in checks if c.hidden]


def _introduction(number: int, exercise: str, summary: str) -> str:
    spec = BY_NAME[exercise]
    visible, hidden = _checks(exercise)
    topic = summary.split(":", 1)[-1].strip()
    names = ", ".join(f"`{f}`" for f in spec.functions)
    lines = [
        f"## {number}. `{exercise}` ({spec.points} points)",
        "",
        f"{topic[:1].upper()}{topic[1:]} Define {names} in the cell below, keeping the "
        "signatures and the contracts in the docstrings. The test cell after it checks these "
        "properties:",
        "",
    ]
    lines += [f"- {c.prop} ({c.points} pt)" for c in visible]
    if hidden:
        points = sum(c.points for c in hidden)
        lines += ["", f"Hidden checks comparing your code with the answer key ({points} pt) "
                  "run when your notebook is graded."]
    return "\n".join(lines)


TITLE = """# Multi-head attention, from softmax to a KV cache

Six exercises, 100 points. Each has an answer cell that starts with `%%exercise NAME`: write
your code there (the first line must stay) and run it. The cell is saved as the file `NAME.py`
and graded on its own: the other exercises are replaced by the kit's reference versions, so one
mistake costs one exercise. Run the test cell under it to see your points and, for every
failing property, the smallest input that breaks it.

Keep each answer cell self-contained (imports, helpers) apart from the earlier exercises'
functions, which it may use by name."""

SETUP = """# Loads the grader: the %%exercise magic and score(). Run this cell first.
%load_ext grader.notebook
from grader.notebook import score"""


def notebook(solutions: Path = ROOT / "solutions") -> dict[str, Any]:
    """The source notebook, with solutions and hidden tests, as a JSON-ready dict."""
    cells = [
        _markdown("title", TITLE),
        _code("setup", SETUP, _nbgrader("setup", locked=True), locked=True),
    ]
    for number, spec in enumerate(EXERCISES, 1):
        name = spec.name
        summary, body, _ = split_solution((solutions / spec.filename).read_text())
        visible, hidden = _checks(name)
        visible_points = sum(c.points for c in visible)
        hidden_points = sum(c.points for c in hidden)
        cells.append(_markdown(f"{name}-intro", _introduction(number, name, summary)))
        cells.append(_code(f"{name}", f"%%exercise {name}\n{body}",
                           _nbgrader(name, solution=True), locked=False))
        cells.append(_code(
            f"{name}_tests",
            f"# Grades the properties listed above; the number it shows is its points "
            f"(of {visible_points}).\n"
            f'score("{name}")',
            _nbgrader(f"{name}_tests", locked=True, points=visible_points), locked=True,
        ))
        if hidden:
            cells.append(_code(
                f"{name}_hidden_tests",
                f"# Answer-key comparisons ({hidden_points} pt) run here when the notebook "
                "is graded.\n"
                "### BEGIN HIDDEN TESTS\n"
                f'score("{name}", hidden=True)\n'
                "### END HIDDEN TESTS",
                _nbgrader(f"{name}_hidden_tests", locked=True, points=hidden_points),
                locked=True,
            ))
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


CONFIG = f'''"""nbgrader settings for the attention-kit course. Written by `make nbgrader`: edit
grader/notebook.py, not this file. Put site settings (Exchange.root, ...) in your own
~/.jupyter/nbgrader_config.py."""

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "attention-kit"
# A test cell grades one exercise under the grader's {EXERCISE_TIMEOUT:g} s limit; a cell that
# still runs past this is interrupted and scores zero, and the notebook goes on.
c.Execute.timeout = {CELL_TIMEOUT}
c.Execute.interrupt_on_timeout = True
'''


def render(solutions: Path = ROOT / "solutions") -> dict[str, str]:
    """The course folder's generated files, by relative path."""
    text = json.dumps(notebook(solutions), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    return {
        "nbgrader_config.py": CONFIG,
        f"source/{ASSIGNMENT}/{ASSIGNMENT}.ipynb": text,
    }


def build(course: Path, solutions: Path = ROOT / "solutions") -> list[Path]:
    """Write the generated files under ``course``; return those that changed."""
    changed = []
    for relative, text in render(solutions).items():
        path = Path(course) / relative
        if not path.is_file() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            changed.append(path)
    return changed


# -- in the kernel --------------------------------------------------------------------------------
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


def _sibling_imports(exercise: str, tree: ast.Module) -> list[str]:
    """``from .x import f`` for each earlier exercise's function the cell uses but not defines."""
    defined: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    imports = []
    for spec in EXERCISES:
        wanted = [f for f in spec.functions if f in used and f not in defined]
        if spec.name != exercise and wanted:
            imports.append(f"from .{spec.name} import {', '.join(wanted)}")
    return imports


def exercise_file(exercise: str, cell: str) -> str:
    """The file an answer cell stands for: one line of imports, then the cell's lines.

    The cell's line ``n`` (the magic being line 1) is line ``n`` of the file, so the grader's
    feedback points at the lines the student sees.
    """
    try:
        imports = _sibling_imports(exercise, ast.parse(cell))
    except SyntaxError:
        imports = []  # the file will not import, and the grader says so
    header = FILE_HEADER.format(name=exercise)
    return ("; ".join(imports) + "  " + header if imports else header) + "\n" + cell


def _without_sibling_imports(tree: ast.Module) -> ast.Module:
    """In the kernel the earlier exercises are plain names: drop ``from .x import ...``."""
    for index, node in enumerate(tree.body):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module in BY_NAME:
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
            "be graded all the same"
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
    if exercise not in BY_NAME:
        raise ValueError(f"%%exercise needs one of {', '.join(EXERCISE_NAMES)}, got {exercise!r}")
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
    from . import engine

    return Path(os.environ.get(KEY_ENV) or engine.DEFAULT_KEY)


def _result(exercise: str) -> Any:
    from . import engine

    kernel = _kernel()
    path = kernel.folder / f"{exercise}.py"
    text = path.read_text() if path.is_file() else ""
    key = _key_folder()
    cached = kernel.results.get((exercise, text, str(key)))
    if cached is None:
        captured = io.StringIO()  # nbgrader gives no credit to a test cell that wrote to stderr
        with contextlib.redirect_stderr(captured):
            cached = engine.grade_submission(
                kernel.folder, exercises=[exercise], key_folder=key,
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
    if exercise not in BY_NAME:
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
    graded = result.exercises[exercise]
    checks = [c for c in graded.checks if c.hidden == hidden]
    points = 0 if graded.error else sum(c.points for c in checks)
    print(_feedback(exercise, graded, checks, points))
    return points


def _feedback(exercise: str, graded: Any, checks: list[Any], points: int) -> str:
    top = sum(c.max_points for c in checks)
    lines = [f"{exercise}: {points} / {top}"]
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

    from . import engine  # noqa: F401  (one torch thread before any student code runs)

    @register_cell_magic("exercise")
    def exercise(line: str, cell: str) -> None:
        """%%exercise NAME: save this cell as NAME.py for grading, then run it."""
        run_exercise_cell(line.strip(), cell, ipython.user_ns)


# -- a notebook as files -------------------------------------------------------------------------
def answer_files(notebook_path: Path, folder: Path) -> list[Path]:
    """Write a student's notebook's answer cells as the files ``%%exercise`` would save.

    ``python -m grader grade FOLDER`` then grades them outside any kernel the student's code
    ran in: the check on a notebook whose outputs look too good to be true.
    """
    cells = json.loads(Path(notebook_path).read_text())["cells"]
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for cell in cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        source = "".join(cell.get("source", []))
        first, _, body = source.partition("\n")
        if grade_id in BY_NAME and cell["cell_type"] == "code":
            if first.strip() != f"%%exercise {grade_id}":
                body = source  # the magic line was removed: grade the cell as it stands
            path = folder / f"{grade_id}.py"
            path.write_text(exercise_file(grade_id, body))
            written.append(path)
    return written


# -- command line ---------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m grader.notebook", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    build_cmd = sub.add_parser("build", help="write the nbgrader course folder")
    build_cmd.add_argument("course", nargs="?", default="build/nbgrader",
                           help="the course folder (default build/nbgrader)")
    files_cmd = sub.add_parser("files", help="write a notebook's answer cells as exercise files")
    files_cmd.add_argument("notebook", help="a student's attention.ipynb")
    files_cmd.add_argument("folder", help="where to write softmax.py, attention.py, ...")
    args = parser.parse_args(argv)
    if args.command == "files":
        written = answer_files(Path(args.notebook), Path(args.folder))
        print("\n".join(f"wrote {p}" for p in written))
        return 0
    changed = build(Path(args.course))
    print("\n".join(f"wrote {p}" for p in changed) or f"{args.course} is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
