"""``make handout``: the student's copy of the kit in ``dist/handout/``.

It holds the stubs as ``exercises/`` (the bonus track's too), the grader without the answer key
and without the hidden checks (``grader/checks/hidden.py``, ``hidden_bonus.py``), a Makefile
whose ``make grade`` sets up its own ``.venv``,
and a student README. The engine sees no ``solutions/`` there and grades on the public checks.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from .stubs import stub_sources

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TARGET = ROOT / "dist" / "handout"
# Instructor-only parts of the grader: the hidden checks and the tools that need the key.
LEFT_OUT = {
    "checks/hidden.py", "checks/hidden_bonus.py", "bench.py", "handout.py", "gradescope.py",
}

MAKEFILE = """\
# Grade your work: `make grade` (the first run creates .venv and installs the pinned versions).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
EXERCISE ?=

.PHONY: grade clean

$(VENV)/.installed: pyproject.toml requirements.lock
\t$(PYTHON) -m venv $(VENV)
\t$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.lock
\t$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
\ttouch $@

## grade: grade exercises/ (one exercise: make grade EXERCISE=softmax)
grade: $(VENV)/.installed
\t$(PY) -m grader grade exercises $(if $(EXERCISE),--exercise $(EXERCISE))

clean:
\trm -rf $(VENV) .hypothesis
"""

README = """\
# attention-kit: multi-head attention, exercise by exercise

You implement six files in `exercises/`, in this order: `softmax.py`, `softmax_backward.py`,
`attention.py`, `heads.py`, `mha.py`, `kv_cache.py`. Each stub has the exact signature and a
docstring with the shapes, dtypes and errors it must raise; replace each
`raise NotImplementedError(...)` with your code.

## Set up and grade

    make grade                      # first run: creates .venv (Python 3.11+), then grades
    make grade EXERCISE=softmax     # one exercise

The grader runs property checks (generated inputs, compared with PyTorch) and tells you, for a
failing check, the property that broke and the smallest input that breaks it. Your code runs in
a separate process per exercise: a crash, an infinite loop (60 s limit) or `sys.exit` costs
that exercise only, and what your code prints is not part of the report.

The bonus track (`masks.py`, `attention_backward.py`, `gqa.py`, `decode.py`) is optional:
it is graded when you fill it in and reported apart from the 100 points.

Your instructor grades with the same public checks plus a few hidden ones that compare with an
answer key; the report says how many points those are worth.

## Rules of thumb
- Keep the function names and signatures; helper functions are fine.
- `attention.py` may import your `softmax`; while grading, each exercise is given the kit's
  reference versions of the others, so one mistake costs one exercise.
"""


def build(target: Path = DEFAULT_TARGET) -> Path:
    target = Path(target)
    if target.exists():
        shutil.rmtree(target)
    (target / "exercises").mkdir(parents=True)
    for filename, text in stub_sources().items():
        (target / "exercises" / filename).write_text(text)
    source = ROOT / "grader"
    for path in sorted(source.rglob("*.py")):
        relative = path.relative_to(source).as_posix()
        if relative in LEFT_OUT or "__pycache__" in relative:
            continue
        destination = target / "grader" / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, destination)
    for name in ("pyproject.toml", "requirements.lock"):
        shutil.copyfile(ROOT / name, target / name)
    (target / "Makefile").write_text(MAKEFILE)
    (target / "README.md").write_text(README)
    (target / ".gitignore").write_text(".venv/\n__pycache__/\n*.egg-info/\n.hypothesis/\n")
    return target


def main(argv: list[str]) -> int:
    target = build(Path(argv[0]) if argv else DEFAULT_TARGET)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
