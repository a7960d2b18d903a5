"""Generating the student stubs in ``exercises/`` from the answer key in ``solutions/``.

Each ``### BEGIN SOLUTION`` / ``### END SOLUTION`` region becomes one
``raise NotImplementedError(...)`` at the marker's indentation; everything else (imports,
signatures, docstrings) is kept, so the stub carries the whole contract.
"""

from __future__ import annotations

import re
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


def write_stubs(course: Course | None = None, target: Path = ROOT / "exercises") -> list[Path]:
    target.mkdir(exist_ok=True)
    changed = []
    for filename, text in stub_sources(course=course).items():
        path = target / filename
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            changed.append(path)
    return changed
