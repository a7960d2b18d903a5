"""The bonus track: exercises graded only when their file is in the submission, and scored
apart from the core 100 points.

A missing bonus file is not an error: the exercise is "not attempted", scores 0 of its points
and has no checks listed. Present files are graded exactly as the core exercises are, and a
failing one is diagnosed (``grader.diagnose_bonus``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .exercises import BY_NAME

NOT_ATTEMPTED = "not attempted"


def grade_bonus(folder: Path, names: list[str], *, key_folder: Path | None,
                **options: Any) -> dict[str, Any]:
    """Grade the bonus exercises ``names`` of the copied submission in ``folder``.

    ``options`` are ``grade_exercise``'s (include_hidden, limits, method, devices).
    """
    from .engine import ExerciseResult, grade_exercise

    results: dict[str, ExerciseResult] = {}
    for name in names:
        if not (folder / f"{name}.py").is_file():
            results[name] = ExerciseResult(name, BY_NAME[name].points, attempted=False)
            continue
        key = key_folder
        if key is not None and not (key / f"{name}.py").is_file():
            key = None
        result = grade_exercise(folder, name, key_folder=key, **options)
        result.max_score = sum(c.max_points for c in result.checks)
        results[name] = result
    return results
