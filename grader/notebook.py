"""The kit as one nbgrader assignment, built from ``solutions/`` and the checks' metadata.

``make nbgrader`` (``python -m grader.notebook build COURSE``) writes an nbgrader course
folder: ``nbgrader_config.py`` and ``source/attention/attention.ipynb``, byte for byte the same
on every run. Each exercise gets an introduction, an answer cell (``%%exercise NAME`` and the
solution file's code, between nbgrader's solution markers), a test cell for the visible checks
and one for the hidden ones; ``grader.kernel`` grades them inside the notebook's kernel.
``python -m grader.notebook files`` turns a submitted notebook back into exercise files.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any

from .exercises import BONUS, BONUS_POINTS, BY_NAME, EXERCISES
from .kernel import CELL_TIMEOUT, EXERCISE_TIMEOUT, exercise_file

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENT = "attention"
BONUS_ASSIGNMENT = "attention-bonus"  # a separate assignment: a course may release it or not


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
%load_ext grader.kernel
from grader.kernel import score"""


BONUS_TITLE = f"""# Bonus: what modern models run

{len(BONUS)} exercises, {BONUS_POINTS} points, graded apart from the core assignment: sliding-window
and padding masks, attention's backward pass by hand, grouped-query attention and decoding
with a KV cache. Answer cells start with `%%exercise NAME` as in the core notebook; they may
use the core exercises' names (`MultiHeadAttention`, `kv_cache_mask`, ...), which the grader
provides from its reference versions."""


def notebook(solutions: Path = ROOT / "solutions", exercises=EXERCISES,
             title: str = TITLE) -> dict[str, Any]:
    """The source notebook, with solutions and hidden tests, as a JSON-ready dict."""
    cells = [
        _markdown("title", title),
        _code("setup", SETUP, _nbgrader("setup", locked=True), locked=True),
    ]
    for number, spec in enumerate(exercises, 1):
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
    def dump(nb: dict[str, Any]) -> str:
        return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"

    return {
        "nbgrader_config.py": CONFIG,
        f"source/{ASSIGNMENT}/{ASSIGNMENT}.ipynb": dump(notebook(solutions)),
        f"source/{BONUS_ASSIGNMENT}/{BONUS_ASSIGNMENT}.ipynb": dump(
            notebook(solutions, BONUS, BONUS_TITLE)
        ),
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
