"""Shared fixtures: submissions built from the answer key with one file changed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"


def make_submission(folder: Path, replace: dict[str, str | None] | None = None) -> Path:
    """A copy of the answer key in ``folder`` with files replaced (text) or removed (None)."""
    folder.mkdir(parents=True, exist_ok=True)
    for source in SOLUTIONS.glob("*.py"):
        shutil.copy(source, folder / source.name)
    for name, text in (replace or {}).items():
        if text is None:
            (folder / name).unlink()
        else:
            (folder / name).write_text(text)
    return folder


@pytest.fixture(scope="session")
def key_result():
    """The answer key graded once per test session (public and hidden checks)."""
    from grader import engine

    return engine.grade_submission(SOLUTIONS)
