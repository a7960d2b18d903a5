"""Gradescope: the autograder bundle (``make gradescope``) and what runs inside it.

Gradescope unzips ``dist/gradescope-autograder.zip`` into ``/autograder/source``, runs
``setup.sh`` once to build the image, then runs ``run_autograder`` once per submission: it
grades ``/autograder/submission`` (the exercise files, or a notebook's answer cells) and writes
``/autograder/results/results.json``. Hidden
checks carry the visibility ``after_published``. The root is ``$AUTOGRADER_ROOT`` (default
``/autograder``), so the bundle can be tried on a simulated tree.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...core.course import KIT_ROOT as ROOT
from ...core.course import SECRET_FILE, course_secret, load, number
from ...core.plural import counted, noun
from ...core.submission import BadSubmission, copy_submission
from ..outputs import inert
from ..outputs.report import failure

BUNDLE = ROOT / "dist" / "gradescope-autograder.zip"
FIXED_TIME = (2020, 1, 1, 0, 0, 0)  # zip entries carry no build time: the same input, same bytes

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, on its Ubuntu base image, from /autograder/source.
set -euxo pipefail
cd /autograder/source
export DEBIAN_FRONTEND=noninteractive
apt-get update
# The pinned NumPy needs Python 3.11 or newer (Ubuntu 22.04 ships 3.10, 24.04 ships 3.12).
PY=""
for candidate in python3.13 python3.12 python3.11; do
    if command -v "$candidate" >/dev/null; then PY="$candidate"; break; fi
done
if [ -z "$PY" ]; then
    apt-get install -y python3.11 python3.11-venv
    PY=python3.11
else
    apt-get install -y "$PY-venv" || true
fi
"$PY" -m venv /autograder/venv
/autograder/venv/bin/python -m pip install --upgrade pip
# torch from PyTorch's CPU index: PyPI's Linux wheel pulls gigabytes of CUDA libraries.
TORCH="$(grep -E '^torch==' requirements.lock)"
/autograder/venv/bin/python -m pip install --index-url https://download.pytorch.org/whl/cpu "$TORCH"
/autograder/venv/bin/python -m pip install -r requirements.lock
/autograder/venv/bin/python -m pip install --no-deps -e .
/autograder/venv/bin/python -m grader grade solutions
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this once per submission. AUTOGRADER_ROOT and AUTOGRADER_PYTHON exist so the
# bundle can be tried outside Gradescope on a simulated tree.
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
cd "$ROOT/source"
mkdir -p "$ROOT/results"
exec "$PYTHON" -m grader gradescope run --root "$ROOT"
"""

KIT_FILES = ("pyproject.toml", "requirements.lock")


def build(target: Path = BUNDLE, course: str | os.PathLike[str] | None = None) -> Path:
    """Write the bundle: the grader, the answer key and the course file (as course.toml)."""
    target = Path(target)
    chosen = load(course)
    target.parent.mkdir(parents=True, exist_ok=True)
    files: dict[str, bytes] = {}
    for folder in ("grader", "solutions"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                files[path.relative_to(ROOT).as_posix()] = path.read_bytes()
    for name in KIT_FILES:
        files[name] = (ROOT / name).read_bytes()
    if chosen.path is not None:
        files["course.toml"] = chosen.path.read_bytes()
    # The hidden checks' inputs come from the course secret: Gradescope grades with the same.
    files[f"solutions/{SECRET_FILE}"] = (course_secret(ROOT / "solutions") + "\n").encode()
    files["README.md"] = b"attention-kit's Gradescope autograder (see the kit's README).\n"
    scripts = {"setup.sh": SETUP_SH, "run_autograder": RUN_AUTOGRADER}
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, text in scripts.items():
            info = zipfile.ZipInfo(name, FIXED_TIME)
            info.external_attr = 0o100755 << 16
            bundle.writestr(info, text)
        for name in sorted(files):
            info = zipfile.ZipInfo(name, FIXED_TIME)
            info.external_attr = 0o100644 << 16
            bundle.writestr(info, files[name], zipfile.ZIP_DEFLATED)
    return target


def find_exercise_folder(submission: Path, names: list[str]) -> Path | None:
    """The folder holding the most exercise files (students upload files or a folder)."""
    best, count = None, 0
    for folder in [submission, *sorted(p for p in submission.rglob("*") if p.is_dir())]:
        if any(part.startswith((".", "__")) for part in folder.relative_to(submission).parts):
            continue
        found = sum((folder / f"{n}.py").is_file() for n in names)
        if found > count:
            best, count = folder, found
    return best


def find_notebook(submission: Path, names: list[str]) -> tuple[Path, Any] | None:
    """The uploaded notebook with the most answer cells, and its answers (read, never run)."""
    from . import notebook

    best = None
    for path in sorted(submission.rglob("*.ipynb")):
        if any(part.startswith((".", "__")) for part in path.relative_to(submission).parts):
            continue  # .ipynb_checkpoints
        try:
            found = notebook.answers(notebook.read_notebook(path), names)
        except (OSError, notebook.NotANotebook):
            continue
        if found.files and (best is None or len(found.files) > len(best[1].files)):
            best = (path, found)
    return best


def _unreadable_notebooks(submission: Path) -> list[str]:
    from . import notebook

    reasons = []
    for path in sorted(submission.rglob("*.ipynb")):
        try:
            notebook.read_notebook(path)
        except (OSError, notebook.NotANotebook) as error:
            reasons.append(f"{path.name} is not a notebook ({error})")
    return reasons


def run(root: Path, write: Callable[[dict[str, Any]], None] = lambda data: None,
        ) -> dict[str, Any]:
    """Grade ``root/submission``: the exercise files, or the answer cells of an uploaded
    notebook (``%%exercise`` cells, taken out as files exactly as nbgrader's isolated autograde
    does), whichever holds more exercises. ``write`` is given results.json's visible part
    before the first hidden check runs (``grader.core.phases``: each hidden test then reads
    that it has not run)."""
    from ...core.run import GradingRun
    from . import notebook

    bundled = root / "source" / "course.toml"
    course = load(bundled if bundled.is_file() else None)
    names = course.names()
    notes = []
    with tempfile.TemporaryDirectory(prefix="attention-kit-upload-") as tmp:
        # Everything below reads this copy, made as every route copies a submission (no link
        # followed, no pipe opened, within the bounds): an upload may hold links (a zip can).
        submission = Path(tmp) / "submission"
        if (root / "submission").is_dir():
            submission.mkdir()
            try:
                copy_submission(root / "submission", submission)
            except BadSubmission as error:
                return failure(f"This submission could not be graded: {error}")
        try:
            folder = find_exercise_folder(submission, names) if submission.is_dir() else None
            files = sum((folder / f"{n}.py").is_file() for n in names) if folder else 0
            uploaded = find_notebook(submission, names) if submission.is_dir() else None
        except OSError as error:  # a path too deep or too long to read
            return failure(f"This submission could not be graded: a file in it cannot be read "
                           f"({error.strerror}).")
        if uploaded is not None and len(uploaded[1].files) > files:
            path, found = uploaded
            folder = Path(tmp) / "answers"
            notebook.write_answers(found, folder)
            notes.append(f"Graded the answer cells of {path.name}.")
            notes += [f"{n} has more than one answer cell: the last one was graded."
                      for n in found.duplicated]
        if folder is None:
            listed = ", ".join(f"{n}.py" for n in course.names("core"))
            unreadable = _unreadable_notebooks(submission) if submission.is_dir() else []
            return failure(" ".join([f"No exercise files found: upload {listed}, or the "
                                     "notebook (.ipynb).", *unreadable]))
        try:
            result = GradingRun(course, root / "source" / "solutions").grade(
                folder, lanes=1, visible=lambda part: write(results_json(part, notes)))
        except BadSubmission as error:
            return failure(f"This submission could not be graded: {error}")
    return results_json(result, notes)


def results_json(result: Any, notes: list[str]) -> dict[str, Any]:
    """results.json of ``result`` (a SubmissionResult), its summary line followed by
    ``notes``; never the student's printed output."""
    from ..outputs import report

    data = report.to_json(result)
    data["output"] = inert.plain(" ".join([visible_summary(result), *notes]))
    data["stdout_visibility"] = "hidden"
    return data


def visible_summary(result: Any) -> str:
    """The line every student sees: the core points of the visible checks only.

    The top-level ``score`` is the core score (it "overrides total of tests", so the bonus
    checks stay out of it), and Gradescope hides that total from students while some tests
    are hidden: "If test cases are hidden, students will not be able to see their total
    score" (autograder specifications). This line must not give the total away either."""
    checks = [c for e in result.exercises.values() for c in e.checks]
    shown = [c for c in checks if not c.hidden]
    line = (f"Visible checks: {number(sum(c.points for c in shown))} / "
            f"{counted(number(sum(c.max_points for c in shown)), 'point')}.")
    later = number(sum(c.max_points for c in checks if c.hidden))
    if later:
        line += (f" {counted(later, 'more point')} {noun(later, 'comes', 'come')} from checks "
                 "shown when grades are published.")
    skipped = [n for n, e in result.bonus.items() if not e.attempted]
    if skipped and len(skipped) < len(result.bonus):  # no test listed for these
        line += (f" Bonus not attempted (no file, or the stub untouched): "
                 f"{', '.join(skipped)}.")
    return line


def run_and_write(root: Path) -> int:
    """Grade ``root/submission`` into ``root/results/results.json``, whatever happens: its
    visible part first, before any hidden check runs, then the whole."""
    try:
        data = run(root, lambda part: _write(root, part))
    except Exception as error:  # the kit's own failure: still leave a results.json behind
        data = failure(f"The autograder failed ({error!r}); please tell your instructor.")
    _write(root, data)
    print(data.get("output", ""))
    return 0


def _write(root: Path, data: dict[str, Any]) -> None:
    """``root/results/results.json``, replaced whole: never half written."""
    (root / "results").mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=root / "results", prefix=".results-",
                                     suffix=".json", delete=False) as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.chmod(handle.name, 0o644)
    os.replace(handle.name, root / "results" / "results.json")
