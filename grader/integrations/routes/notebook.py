"""The kit as one nbgrader assignment, built from ``solutions/`` and the checks' metadata.

``make nbgrader`` (``grader nbgrader build COURSE_DIR``) writes an nbgrader course
folder: ``nbgrader_config.py`` and ``student/nbgrader_config.py`` (``nbgrader_settings``),
``source/attention/attention.ipynb`` (the core track) and
``source/attention-bonus/attention-bonus.ipynb`` (the bonus track), byte for byte the same on
every run into the same folder. Each exercise the course enables gets an introduction, an
answer cell (``%%exercise NAME`` and the solution file's code, between nbgrader's solution
markers), a test cell for the visible checks and one for the hidden ones, worth the course's
points;
``grader.integrations.routes.kernel`` grades them inside the notebook's kernel.
``grader nbgrader files NOTEBOOK FOLDER`` turns a submitted notebook back into
exercise files.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.course import COURSE_ENV, DEFAULT_COURSE, EXERCISES_BY_NAME, Course, load, number
from ...core.course import KIT_ROOT as ROOT
from ...core.exercise import Exercise
from ...core.plural import counted, noun
from ...core.reader import read_regular
from ...sandbox import readers
from ..outputs import inert
from .kernel import exercise_file, functions
from .nbgrader_settings import STUDENT_CONFIG, config, student_config

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
        elif (isinstance(node, ast.ImportFrom) and node.level == 1
              and node.module in EXERCISES_BY_NAME()):
            while first > 1 and not lines[first - 2].strip():
                first -= 1
            drop.update(range(first, last + 1))
            imports.append(ast.get_source_segment(text, node) or "")
    kept = [line for number, line in enumerate(lines, 1) if number not in drop]
    return summary, "\n".join(kept).strip("\n") + "\n", imports


def _checks(spec: Exercise, course: Course) -> tuple[list[Any], list[Any], dict[str, float]]:
    """The visible and the hidden checks, and each check's points in this course."""
    checks = spec.checks
    return ([c for c in checks if not c.hidden], [c for c in checks if c.hidden],
            course.check_points(spec))


def topic(summary: str) -> str:
    """What an exercise is about, from its key's module docstring: "Bonus exercise `masks`:
    sliding-window masks and padding masks for batches." gives "sliding-window masks and padding
    masks for batches" (the first line, after its colon, without the full stop)."""
    line = summary.strip().splitlines()[0] if summary.strip() else ""
    return line.split(":", 1)[-1].strip().removesuffix(".")


def topics(course: Course, track: str, solutions: Path = ROOT / "solutions") -> list[str]:
    """The topic of each exercise of ``track`` the course enables, in its order, from the
    answer key (``topic``): the notebooks' and the docs' lists of what a track covers."""
    return [topic(split_solution((solutions / spec.filename).read_text())[0])
            for spec in course.exercises(track)]


def _introduction(index: int, spec: Exercise, summary: str, course: Course) -> str:
    visible, hidden, points = _checks(spec, course)
    about = topic(summary)
    names = ", ".join(f"`{f}`" for f in spec.functions)
    worth = counted(course.points(spec.name), "point")
    if hidden:
        worth += f", {number(sum(points[c.name] for c in hidden))} of them from hidden checks"
    lines = [
        f"## {index}. `{spec.name}` ({worth})",
        "",
        f"{about[:1].upper()}{about[1:]}. Define {names} in the cell below, keeping the "
        "signatures and the contracts in the docstrings. The test cell after it checks these "
        "properties:",
        "",
    ]
    lines += [f"- {c.prop} ({points[c.name]} pt)" for c in visible]
    if hidden:
        total = number(sum(points[c.name] for c in hidden))
        lines += ["", f"Hidden checks comparing your code with the answer key ({total} pt) "
                  "run when your notebook is graded."]
    return "\n".join(lines)


TITLE = """# Multi-head attention, from `{first}` to `{last}`

{count}, {points}{hidden}: {topics}. Each has an answer cell that starts with
`%%exercise NAME`: write your code there (the first line must stay) and run it. The cell is
saved as the file `NAME.py` and graded on its own: the other exercises are replaced by the
kit's reference versions, so one mistake costs one exercise. Run the test cell under it to see
your points and, for every failing property, the smallest input that breaks it.

Keep each answer cell self-contained (imports, helpers) apart from the earlier exercises'
functions, which it may use by name."""

SETUP = """# Loads the grader: the %%exercise magic and score(). Run this cell first.
%load_ext grader.integrations.routes.kernel
from grader.integrations.routes.kernel import score"""


BONUS_TITLE = """# Bonus: what modern models run

{count}, {points}{hidden}, graded apart from the core assignment: {topics}. Answer cells start
with `%%exercise NAME` as in the core notebook; they may use the core exercises' names
({names}), which the grader provides from its reference versions."""


def notebook(solutions: Path = ROOT / "solutions", course: Course | None = None,
             track: str = "core") -> dict[str, Any]:
    """The source notebook of one track, with solutions and hidden tests, as a JSON-ready
    dict."""
    course = course or load()
    exercises = course.exercises(track)
    hidden = number(sum(_checks(spec, course)[2][c.name] for spec in exercises
                        for c in _checks(spec, course)[1]))
    core = course.exercises("core")
    title = (TITLE if track == "core" else BONUS_TITLE).format(
        count=counted(len(exercises), "exercise"), points=counted(course.total(track), "point"),
        hidden=f" ({number(course.total(track) - hidden)} from the test cells you can run, "
               f"{hidden} from hidden tests run when your notebook is graded)" if hidden else "",
        topics="; ".join(topics(course, track, solutions)),
        first=exercises[0].name if exercises else "", last=exercises[-1].name if exercises else "",
        names=", ".join(f"`{f}`" for spec in core for f in spec.functions) or "none")
    setup = SETUP
    if course.path is not None and course.path != DEFAULT_COURSE.resolve():
        setup += f"\n%env {COURSE_ENV}={course.path}"  # the kernel grades with this course
    cells = [
        _markdown("title", title),
        _code("setup", setup, _nbgrader("setup", locked=True), locked=True),
    ]
    for index, spec in enumerate(exercises, 1):
        name = spec.name
        summary, body, _ = split_solution((solutions / spec.filename).read_text())
        visible, hidden, points = _checks(spec, course)
        visible_points = number(sum(points[c.name] for c in visible))
        hidden_points = number(sum(points[c.name] for c in hidden))
        cells.append(_markdown(f"{name}-intro", _introduction(index, spec, summary, course)))
        cells.append(_code(f"{name}", f"%%exercise {name}\n{body}",
                           _nbgrader(name, solution=True), locked=False))
        cells.append(_code(
            f"{name}_tests",
            f"# Grades the properties listed above; the number it shows is its points "
            f"(of {visible_points}" + (
                f"; the other {hidden_points} {noun(hidden_points, 'comes', 'come')} from the "
                "hidden tests below, run when the notebook is graded" if hidden else "") + ").\n"
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


def render(solutions: Path = ROOT / "solutions", course: Course | None = None,
           exchange: str | None = None, folder: Path = Path("build/nbgrader")) -> dict[str, str]:
    """The course folder's generated files, by relative path (``folder``: the course folder,
    whose exchange the students' settings name by its full path)."""
    course = course or load()

    def dump(nb: dict[str, Any]) -> str:
        return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"

    files = {"nbgrader_config.py": config(exchange),
             STUDENT_CONFIG: student_config(folder, exchange)}
    for track, assignment in (("core", ASSIGNMENT), ("bonus", BONUS_ASSIGNMENT)):
        if course.exercises(track):
            files[f"source/{assignment}/{assignment}.ipynb"] = dump(
                notebook(solutions, course, track))
    return files


def build(folder: Path, solutions: Path = ROOT / "solutions",
          course: Course | None = None, exchange: str | None = None) -> list[Path]:
    """Write the generated files under ``folder``; return those that changed."""
    changed = []
    for relative, text in render(solutions, course, exchange, folder).items():
        path = Path(folder) / relative
        if not path.is_file() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            changed.append(path)
    return changed


# -- a notebook as files -------------------------------------------------------------------------
MAX_NOTEBOOK_BYTES = 20 << 20  # as a submission folder (engine.MAX_SUBMISSION_BYTES)


class NotANotebook(ValueError):
    """A submitted file the answers cannot be read from; the message says why."""


@dataclass
class Answers:
    """A notebook's answer cells as the files ``%%exercise`` saves, keyed by exercise."""

    files: dict[str, str]
    duplicated: list[str]  # exercises with several answer cells: the last one counts
    sources: dict[str, str]  # the answer cells as they stand in the notebook


def read_notebook(path: Path) -> dict[str, Any]:
    """A notebook file's JSON, read as data (nothing in it runs); NotANotebook if it is not
    JSON with a list of cells, or not a file to read (a link is not followed, a pipe not
    waited on: ``grader.core.reader.read_regular``)."""
    raw = read_regular(path, MAX_NOTEBOOK_BYTES)
    if raw is None:
        raise NotANotebook("not a regular file")
    if len(raw) > MAX_NOTEBOOK_BYTES:
        raise NotANotebook(f"larger than {MAX_NOTEBOOK_BYTES >> 20} MiB")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise NotANotebook("invalid JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise NotANotebook("JSON without a list of cells")
    return data


def without_surrogates(value: Any) -> Any:
    """A notebook's JSON with every lone surrogate (valid in JSON, never in UTF-8) escaped."""
    if isinstance(value, str):
        return inert.text(value)
    if isinstance(value, list):
        return [without_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {inert.text(k): without_surrogates(v) for k, v in value.items()}
    return value


def has_surrogates(value: Any) -> bool:
    if isinstance(value, str):
        return inert.text(value) != value
    if isinstance(value, list):
        return any(has_surrogates(v) for v in value)
    if isinstance(value, dict):
        return any(has_surrogates(k) or has_surrogates(v) for k, v in value.items())
    return False


def _text(source: Any) -> str:
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    return source if isinstance(source, str) else ""


def answers(nb: dict[str, Any], names: Any = None) -> Answers:
    """The answer cells of ``nb`` (a notebook's JSON), found by their nbgrader ``grade_id``
    (the exercise's name), as exercise files. Only ``names`` count (default: every exercise).

    A cell that still starts with ``%%exercise NAME`` is saved without that line, as the magic
    does; one whose magic line was removed is graded as it stands. Where a ``grade_id`` appears
    more than once the last cell counts, as in ``nbgrader autograde`` (its DeduplicateIds keeps
    the last one). The cells are parsed by the reader (``readers.cell_names``), never here.
    """
    wanted = set(EXERCISES_BY_NAME() if names is None else names)
    bodies: dict[str, str] = {}
    sources: dict[str, str] = {}
    duplicated: set[str] = set()
    for cell in nb.get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata")
        nbgrader = meta.get("nbgrader") if isinstance(meta, dict) else None
        grade_id = nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None
        if not isinstance(grade_id, str) or grade_id not in wanted:
            continue
        source = _text(cell.get("source"))
        first, _, body = source.partition("\n")
        if first.strip() != f"%%exercise {grade_id}":
            body = source  # the magic line was removed: grade the cell as it stands
        if grade_id in bodies:
            duplicated.add(grade_id)
        bodies[grade_id], sources[grade_id] = body, source
    names = readers.cell_names(bodies, functions()) if bodies else {}
    files = {grade_id: exercise_file(grade_id, body, names.get(grade_id, (set(), set())))
             for grade_id, body in bodies.items()}
    return Answers(files, sorted(duplicated), sources)


def write_answers(found: Answers, folder: Path) -> list[Path]:
    """Write the answer files into ``folder`` (created); returns their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in found.files.items():
        path = folder / f"{name}.py"
        # A lone surrogate (valid in a notebook's JSON, never in UTF-8) is written as the bytes
        # it stands for: the file then fails to import, which costs its exercise alone.
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        written.append(path)
    return written


def answer_files(notebook_path: Path, folder: Path) -> list[Path]:
    """Write a student's notebook's answer cells as the files ``%%exercise`` would save.

    ``python -m grader grade FOLDER`` then grades them outside any kernel the student's code
    ran in. Nothing in the notebook runs; NotANotebook for a file that is not one.
    """
    return write_answers(answers(read_notebook(notebook_path)), folder)
