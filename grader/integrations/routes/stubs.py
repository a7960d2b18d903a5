"""Generating the student stubs in ``exercises/`` from the answer key in ``solutions/``.

Each ``### BEGIN SOLUTION`` / ``### END SOLUTION`` region becomes one
``raise NotImplementedError(...)`` at the marker's indentation; everything else (imports,
signatures, docstrings) is kept, so the stub carries the whole contract.

Writing them never destroys work: a file is replaced only where it is missing or is still what
the kit last wrote there (or what it would write now). The kit keeps a digest of each file it
writes (``build/stubs.json``); a file that differs from both, someone's work, is refused by
name unless ``force`` is given, and then kept beside the new stub as ``NAME.py.orig``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ...core.course import KIT_ROOT as ROOT
from ...core.course import Course, load

BEGIN = re.compile(r"^(\s*)### BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*### END SOLUTION\s*$")


def strip_solution(source: str, name: str) -> str:
    out: list[str] = []
    inside = False
    for line in source.splitlines():
        begin = BEGIN.match(line)
        if begin:
            if inside:
                raise ValueError(f"{name}: nested BEGIN SOLUTION")
            inside = True
            indent = begin.group(1)
            out.append(f'{indent}raise NotImplementedError("{name}: not implemented yet")')
        elif END.match(line):
            if not inside:
                raise ValueError(f"{name}: END SOLUTION without BEGIN")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{name}: BEGIN SOLUTION without END")
    return "\n".join(out) + "\n"


def stub_sources(solutions: Path = ROOT / "solutions",
                 course: Course | None = None) -> dict[str, str]:
    """The stub of every exercise the course enables, by file name."""
    return {
        f"{n}.py": strip_solution((solutions / f"{n}.py").read_text(), n)
        for n in (course or load()).names()
    }


EXERCISES = ROOT / "exercises"
RECORD = ROOT / "build" / "stubs.json"


def shown(path: Path) -> str:
    """``path`` as a reader in the current folder would type it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


class ChangedStubs(Exception):
    """Files that differ from what the kit last wrote: the message names them and says how to
    replace them anyway."""

    def __init__(self, paths: list[Path]):
        self.paths = paths
        one = len(paths) == 1
        super().__init__(
            f"not replacing {', '.join(shown(p) for p in paths)}: "
            f"{'it differs' if one else 'each differs'} from the stub the kit last wrote there "
            f"(your work?). Keep {'it' if one else 'them'}, or replace "
            f"{'it' if one else 'them'} with make stubs FORCE=1 (.venv/bin/grader stubs --force): "
            + (f"the old file is then kept as {shown(paths[0])}.orig" if one else
               "each old file is then kept beside it as NAME.py.orig"))


@dataclass(frozen=True)
class Written:
    path: Path
    kept: Path | None = None  # where the file it replaced was kept (``force``)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _read_record(record: Path) -> dict[str, str]:
    try:
        found = json.loads(record.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _kept_name(path: Path) -> Path:
    """``NAME.py.orig``, or ``NAME.py.orig.N`` for the first N not taken: nothing kept before is
    replaced either."""
    kept, n = path.with_name(path.name + ".orig"), 1
    while kept.exists():
        kept, n = path.with_name(f"{path.name}.orig.{n}"), n + 1
    return kept


def write_stubs(course: Course | None = None, target: Path | None = None, *,
                force: bool = False, record: Path | None = None) -> list[Written]:
    """Write the course's stubs into ``target`` (default ``exercises/``); return what was
    written. ChangedStubs, and nothing written, where a file differs from what the kit last
    wrote (``record``, default ``RECORD``) and from the stub, unless ``force``."""
    target, record = target or EXERCISES, record or RECORD
    stubs = stub_sources(course=course)
    known = _read_record(record)
    key = {name: str((target / name).resolve()) for name in stubs}
    current = {}
    for name in stubs:
        try:
            current[name] = (target / name).read_text()
        except FileNotFoundError:
            pass
    ours = {name for name, text in current.items()
            if text == stubs[name] or known.get(key[name]) == _digest(text)}
    changed = [target / name for name in current if name not in ours]
    if changed and not force:
        raise ChangedStubs(changed)
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in stubs.items():
        path = target / name
        if current.get(name) == text:
            continue
        kept = None
        if name in current and name not in ours:
            kept = _kept_name(path)
            os.replace(path, kept)
        path.write_text(text)
        written.append(Written(path, kept))
    known.update({key[name]: _digest(text) for name, text in stubs.items()})
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")
    return written
