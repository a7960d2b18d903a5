"""Building test submissions: the answer key with some files replaced, and file hashes.

Imported by the tests as a plain module (pytest puts tests/ on sys.path); the zoo's
submissions are built in ``zoo.catalog``."""

from __future__ import annotations

import hashlib
import shutil
import textwrap
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
SOLUTIONS = KIT / "solutions"
STUBS = KIT / "exercises"


def make_submission(
    folder: Path, files: dict[str, str | None] | None = None, *, base: Path | None = SOLUTIONS
) -> Path:
    """A submission folder: every exercise copied from ``base``, then ``files`` written over
    (a value of None removes that file)."""
    folder.mkdir(parents=True, exist_ok=True)
    if base is not None:
        for source in base.glob("*.py"):
            shutil.copyfile(source, folder / source.name)
    for name, text in (files or {}).items():
        if text is None:
            (folder / name).unlink()
        else:
            (folder / name).write_text(textwrap.dedent(text))
    return folder


def tree_digest(*roots: Path) -> dict[str, str]:
    """sha256 of every file under ``roots`` (caches included), keyed by path."""
    digests = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                digests[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


# ``python -m grader`` with the source rule switched off in that process (every file passes it)
# and the worker's audit hook with it, as if a student had found a way past both: the attacks
# of the tests that prove the layers outside the student's process (the worker's files and
# memory, the kernel, torch's dispatcher, the grading process) run through it. In-process,
# ``rule_off(monkeypatch)``. The hook's own tests leave it on (``tests/test_audit_hook.py``).
RULE_OFF = ("import sys; from grader.core import engine, student; "
            "engine._verdict = lambda *args, **kwargs: None; "
            "student._audited = lambda: False; "
            "from grader.integrations.routes.cli import main; sys.exit(main(sys.argv[1:]))")


def grader_command(python: str | Path, *args: str, rule: bool = True) -> list[str]:
    """The command line of ``python -m grader ARGS``; without the source rule if not ``rule``."""
    return [str(python), *(["-m", "grader"] if rule else ["-c", RULE_OFF]), *args]


def rule_off(monkeypatch) -> None:
    """Switch the source rule and the audit hook off in this process (and the graders a batch
    forks from it)."""
    from grader.core import engine, student

    monkeypatch.setattr(engine, "_verdict", lambda *args, **kwargs: None)
    monkeypatch.setattr(student, "_audited", lambda: False)


# The kit's exercises, as the default course (course.toml) enables them.
from grader.core.course import EXERCISES_BY_NAME, load  # noqa: E402

COURSE = load(KIT / "course.toml")
EXERCISES = EXERCISES_BY_NAME()
CORE = tuple(COURSE.names("core"))
BONUS = tuple(COURSE.names("bonus"))


def checks_for(name: str, *, hidden: bool = True) -> list:
    """An exercise's checks, the hidden ones included unless ``hidden=False``."""
    return [c for c in EXERCISES[name].checks if hidden or not c.hidden]
