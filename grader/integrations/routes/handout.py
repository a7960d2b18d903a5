"""``make handout``: the student's copy of the kit in ``dist/handout/``.

It holds the stubs of the course's exercises as ``exercises/``, the course file, the grader
without the answer key and without the hidden checks (each exercise module's
``### BEGIN HIDDEN CHECKS`` region is cut out), a Makefile whose ``make grade`` sets up its own
``.venv``, and a student README. The engine sees no ``solutions/`` there and grades on the
public checks.

Writing it never destroys anyone's files. The folder keeps a record of what the kit wrote there
(``.attention-kit-handout.json``: each file's digest); a rebuild replaces those files, and
removes those it no longer writes, where they are still as the kit wrote them, and leaves
everything else in the folder alone. A file it would replace that is not as the kit wrote it
(edited since, or someone's) is refused by name, and nothing is written, unless ``force``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

from ...core.course import KIT_ROOT as ROOT
from ...core.course import Course, load, number
from ...core.plural import counted
from ...sandbox.call_limit import CALL_WALL, SHRINK_STOPS
from ...sandbox.isolation import TORCH_CALLS, Limits
from .stubs import shown, stub_sources

DEFAULT_TARGET = ROOT / "dist" / "handout"
# Instructor-only tools: they need the answer key (the benchmarks and the CUDA check are in the
# kit's tools/, outside the package).
LEFT_OUT = {"integrations/routes/handout.py", "integrations/routes/handout_check.py",
            "integrations/routes/gradescope.py"}
HIDDEN = re.compile(r"^### BEGIN HIDDEN CHECKS\n.*?^### END HIDDEN CHECKS\n", re.M | re.S)


def without_hidden_checks(source: str) -> str:
    """An exercise module's source with its hidden checks cut out."""
    return HIDDEN.sub("", source)


PYTEST_TABLE = re.compile(r"^\[tool\.pytest\.ini_options\]\n.*?(?=^\[|\Z)", re.M | re.S)
# The kit's table points pytest at the kit's own tests/, which the handout does not have.
HANDOUT_PYTEST = """\
[tool.pytest.ini_options]
# `pytest` runs the grader's checks on exercises/, one test per check (the kit's pytest plugin,
# grader/integrations/routes/pytest_plugin.py), and ends with the points `make grade` gives.
testpaths = ["exercises"]
filterwarnings = ["error"]

"""


def handout_pyproject(text: str) -> str:
    """The kit's ``pyproject.toml`` with the handout's pytest settings."""
    found, count = PYTEST_TABLE.subn(lambda _: HANDOUT_PYTEST, text)
    if count != 1:
        raise ValueError("pyproject.toml has no [tool.pytest.ini_options] table")
    return found

MAKEFILE = """\
# Grade your work: `make grade` (the first run creates .venv and installs the pinned versions).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
EXERCISE ?=
# torch: on Linux the CPU build, from PyTorch's CPU wheel index (PyPI's Linux wheel is the CUDA
# build, gigabytes more); make grade TORCH=cuda installs that one instead.
TORCH ?= cpu
TORCH_INDEX := $(if $(and $(filter cpu,$(TORCH)),$(filter Linux,$(shell uname -s))),\\
	--extra-index-url https://download.pytorch.org/whl/cpu)
# The pinned NumPy needs Python 3.11 or newer: stop with one line on an older one.
PYTHON_VERSION = $(shell $(PYTHON) -c 'import sys; print(sys.version.split()[0])' 2>/dev/null)
PYTHON_OK = $(shell $(PYTHON) -c 'import sys; print(sys.version_info >= (3, 11))' 2>/dev/null)
CHECK_PYTHON = $(if $(filter True,$(PYTHON_OK)),,$(error the grader needs Python 3.11 or newer, \
and $(PYTHON) is $(or $(PYTHON_VERSION),not found): run make PYTHON=python3.11 (or newer)))

.PHONY: grade clean

# The install says what it does, one line a step. What pip prints (warnings it recovered from,
# such as an index it could not reach) goes to .venv/install.log, shown in full if a step fails.
INSTALL_LOG := $(VENV)/install.log
PIP := $(PY) -m pip install --disable-pip-version-check
LOGGED := >>$(INSTALL_LOG) 2>&1 || { cat $(INSTALL_LOG); echo "make: the step above failed \\
(its log: $(INSTALL_LOG))"; exit 1; }
TORCH_PIN = $(shell grep '^torch==' requirements.lock)
TORCH_STEP = installing $(TORCH_PIN), the CPU build (about 190 MB)

$(VENV)/.installed: pyproject.toml requirements.lock
\t$(CHECK_PYTHON)
\t@echo "setting up .venv/ with $(PYTHON) (Python $(PYTHON_VERSION)); the first time takes minutes"
\t@$(PYTHON) -m venv $(VENV) && : >$(INSTALL_LOG)
\t$(if $(TORCH_INDEX),@echo "$(TORCH_STEP)")
\t$(if $(TORCH_INDEX),@$(PIP) --retries 2 --no-deps $(TORCH_INDEX) $(TORCH_PIN) $(LOGGED))
\t@echo "installing the pinned packages (requirements.lock: torch, numpy, hypothesis, pytest)"
\t@$(PIP) -r requirements.lock $(LOGGED)
\t@echo "installing the grader into .venv/ (its command: .venv/bin/grader)"
\t@$(PIP) --no-deps -e . $(LOGGED)
\t@touch $@

## grade: grade exercises/ (one exercise: make grade EXERCISE=softmax)
grade: $(VENV)/.installed
\t$(VENV)/bin/grader grade $(strip exercises $(EXERCISE:%=--exercise %))

clean:
\trm -rf $(VENV) .hypothesis
"""

README = """\
# attention-kit: multi-head attention, exercise by exercise

You implement {count} in `exercises/`, in this order: {core}. Each stub has the exact
signature and a docstring with the shapes, dtypes and errors it must raise; replace each
`raise NotImplementedError(...)` with your code.

## Set up and grade

    make grade                      # first run: creates .venv (Python 3.11+), then grades
    make grade EXERCISE=softmax     # one exercise
    .venv/bin/pytest                # the same checks as pytest tests (after make grade)
    .venv/bin/pytest exercises/softmax.py -x    # one file; stop at the first failing check

The grader runs property checks (generated inputs, compared with PyTorch) and tells you, for a
failing check, the property that broke and the smallest input that breaks it. Your code runs in
a separate process per exercise: a crash or `sys.exit` costs that exercise only, and what your
code prints is not part of the report. {limits}
A function whose result ignores its input (the same for any input, or its input as given)
earns no points from the checks it passes: uniform weights do sum to 1, and show nothing.

With `pytest` (and your editor's test panel, with `.venv` as the interpreter) each check is one
test, `exercises/<exercise>.py::<check>` (`pytest -k softmax`, `pytest --lf`, `pytest -m
bonus`): a failing one shows the same text as the report, a check you have not implemented yet
is an `xfail`, and the run ends with the same points as `make grade`.

{bonus}
Your instructor grades with the same public checks plus a few hidden ones that compare with an
answer key. {hidden}

## Rules of thumb
- Keep the function names and signatures; helper functions are fine.
- `attention.py` may import your `softmax`; while grading, each exercise is given the kit's
  reference versions of the others, so one mistake costs one exercise.
"""


def hidden_points(course: Course, track: str) -> float:
    """The points of a track's hidden checks: what a handout's report cannot count."""
    return number(sum(points for e in course.exercises(track)
                      for name, points in course.check_points(e).items()
                      if next(c for c in e.checks if c.name == name).hidden))


def hidden_sentence(course: Course) -> str:
    """What the handout's totals leave out, in one sentence with the numbers."""
    total, hidden = course.total(), hidden_points(course, "core")
    text = (f"`make grade` and `pytest` count the public checks: "
            f"{number(total - hidden)} of the {counted(total, 'point')}")
    if course.exercises("bonus"):
        bonus, bonus_hidden = course.total("bonus"), hidden_points(course, "bonus")
        text += f" (and {number(bonus - bonus_hidden)} of the bonus track's {number(bonus)})"
    text += (f"; the hidden checks are worth the other {number(hidden)}"
             + (f" (and {number(bonus_hidden)})" if course.exercises("bonus") else "")
             + ", and the report's last line under each total says so.")
    return text


def readme(course: Course) -> str:
    core = ", ".join(f"`{e.filename}`" for e in course.exercises("core"))
    bonus = course.exercises("bonus")
    extra = ""
    if bonus:
        files = ", ".join(f"`{e.filename}`" for e in bonus)
        extra = (f"The bonus track ({files}) is optional: it is graded when you fill it in and "
                 f"reported apart from the {counted(course.total(), 'point')}.\n")
    return README.format(count=counted(len(course.names("core")), "file"), core=core,
                         bonus=extra, hidden=hidden_sentence(course),
                         limits=limits_sentence(course))


def limits_sentence(course: Course, limits: Limits = Limits()) -> str:
    """The limits `make grade` holds your code to, as it enforces them."""
    torch = [e.filename for e in course.exercises() if e.framework == "torch"]
    call = f"{limits.call:g} s of CPU time"
    if torch:
        call += (f", {number(limits.call * TORCH_CALLS):g} s in "
                 f"{', '.join(f'`{name}`' for name in torch)}")
    return (f"One call of your code that runs past its limit ({call}; {CALL_WALL} times that "
            "in wall seconds for a call that waits) is stopped, as an infinite loop is: its "
            "check fails and shows the input that did it (made smaller as far as "
            f"{counted(SHRINK_STOPS, 'more stopped call')} per exercise allow), and the other "
            f"checks go on. An exercise's other calls have {limits.timeout:g} s in all; past "
            "them the exercise is not graded.")


def contents(course: Course) -> dict[str, bytes]:
    """Every file of the handout, by its path in the handout."""
    files = {f"exercises/{name}": text.encode()
             for name, text in stub_sources(course=course).items()}
    source = ROOT / "grader"
    for path in sorted(source.rglob("*.py")):
        relative = path.relative_to(source).as_posix()
        if relative in LEFT_OUT or "__pycache__" in relative:
            continue
        files[f"grader/{relative}"] = without_hidden_checks(path.read_text()).encode()
    files["requirements.lock"] = (ROOT / "requirements.lock").read_bytes()
    files["pyproject.toml"] = handout_pyproject((ROOT / "pyproject.toml").read_text()).encode()
    if course.path is not None:
        files["course.toml"] = Path(course.path).read_bytes()
    files["Makefile"] = MAKEFILE.encode()
    files["README.md"] = readme(course).encode()
    files[".gitignore"] = b".venv/\n__pycache__/\n*.egg-info/\n.hypothesis/\n"
    return files


# -- writing the folder: what the kit wrote is its own, the rest is someone's -----------------
RECORD = ".attention-kit-handout.json"


class HandoutError(Exception):
    """The handout cannot be written where it was asked: the message says why."""


class ChangedFiles(HandoutError):
    """Files the handout would replace that are not as the kit wrote them (``lost``: each
    one's path in the handout, and why): the message names them and says how to go ahead."""

    def __init__(self, target: Path, lost: dict[str, str]):
        self.lost = lost
        them = "it" if len(lost) == 1 else "them"
        named = ", ".join(f"{shown(target / rel)} ({why})" for rel, why in sorted(lost.items()))
        super().__init__(
            f"not writing {shown(target)}: it would replace {named}. Move {them} out of the "
            f"folder, or replace {them} with make handout FORCE=1 (.venv/bin/grader handout "
            f"{shown(target)} --force); your other files there are kept either way")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_record(target: Path) -> dict[str, str]:
    """What the kit last wrote in ``target``, by path; only plain paths inside it count."""
    try:
        found = json.loads((target / RECORD).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {rel: digest for rel, digest in found.items() if isinstance(digest, str)
            and not rel.startswith("/") and all(p not in ("", ".", "..") for p in rel.split("/"))}


def _folders_in_the_way(target: Path, rel: str) -> tuple[str, str] | None:
    """The first folder of ``rel``'s path under ``target`` that is not a plain folder (a link,
    a file), with what it is; None where each is one or is not there yet."""
    parts = rel.split("/")
    for depth in range(1, len(parts)):
        folder = target.joinpath(*parts[:depth])
        if folder.is_symlink():
            return "/".join(parts[:depth]), "a link"
        if folder.exists() and not folder.is_dir():
            return "/".join(parts[:depth]), "a file where the handout has a folder"
    return None


def _lost(target: Path, files: dict[str, bytes], known: dict[str, str]) -> dict[str, str]:
    """What writing ``files`` into ``target`` would lose, by path in the handout: each place
    the kit writes that holds something else than the kit put there (or would put there)."""
    lost: dict[str, str] = {}
    for rel, data in sorted(files.items()):
        path, blocked = target / rel, _folders_in_the_way(target, rel)
        if blocked:
            lost.setdefault(*blocked)
        elif path.is_symlink():
            lost[rel] = "a link"
        elif path.is_dir():
            lost[rel] = "a folder"
        elif path.exists():
            current = path.read_bytes()
            if current != data and _digest(current) != known.get(rel):
                lost[rel] = ("changed since the kit wrote it" if rel in known else
                             "not written by the kit")
    return lost


def _remove_stale(target: Path, rel: str, digest: str) -> None:
    """Remove a file the kit wrote last time and no longer does, and the folders that leaves
    empty; a file changed since (someone's now) is left alone."""
    path = target / rel
    if (_folders_in_the_way(target, rel) or path.is_symlink() or not path.is_file()
            or _digest(path.read_bytes()) != digest):
        return
    path.unlink()
    for folder in path.parents:
        if folder == target or any(folder.iterdir()):
            break
        folder.rmdir()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def build(target: Path = DEFAULT_TARGET, course: Course | None = None, *,
          force: bool = False) -> Path:
    """Write the handout into ``target``: the files the kit wrote there last time and no longer
    writes are removed, the rest of the folder is left as it is. ChangedFiles, and nothing
    written, where a file the kit would replace is not as the kit last wrote it (nor as it
    would write it now), unless ``force``."""
    course = course or load()
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise HandoutError(f"{shown(target)} is not a folder")
    files, known = contents(course), _read_record(target)
    lost = _lost(target, files, known)
    if lost and not force:
        raise ChangedFiles(target, lost)
    for rel in lost:
        _remove(target / rel)
    for rel in sorted(known.keys() - files.keys()):
        _remove_stale(target, rel, known[rel])
    for rel, data in files.items():
        path = target / rel
        if path.is_file() and path.read_bytes() == data:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (target / RECORD).write_text(json.dumps({rel: _digest(data) for rel, data in files.items()},
                                            indent=1, sort_keys=True) + "\n")
    return target
