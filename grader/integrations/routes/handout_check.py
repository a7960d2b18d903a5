"""What the handout may not share with the answer key, and where it does
(``python -m grader handout --check``, ``make handout-check``).

The handout ships each exercise module (``grader/problems/``) without its hidden checks, and
each stub: the key's file with every ``### BEGIN SOLUTION`` region cut to one ``raise``. No line
it ships may repeat a line of a solution region that says something: three or more names,
numbers or strings (``else:`` and ``)`` say nothing), comments aside, compared stripped of
their indentation. A reference that checks its input in the key's own words (``if n_head < 1:
raise ValueError(...)``) gives a student that line of the key: write it another way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ...core.course import KIT_ROOT as ROOT
from .handout import HIDDEN

WORD = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|\"[^\"]*\"|'[^']*'")  # names, numbers, strings
REGION = re.compile(r"^[ \t]*### BEGIN SOLUTION[ \t]*\n(.*?)^[ \t]*### END SOLUTION", re.M | re.S)
BEGIN = re.compile(r"^\s*### BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*### END SOLUTION\s*$")


@dataclass(frozen=True)
class Shared:
    """A line the handout ships (``where``: its file in the handout and line number there;
    ``source``: the kit's file and line it comes from) that repeats a line of the key
    (``key``: its file and line number)."""

    where: str
    source: str
    key: str
    text: str

    def __str__(self) -> str:
        shipped = "" if self.source == self.where else f" (shipped as {self.where})"
        return f"{self.source}: {self.text!r} repeats {self.key}{shipped}"


def key_lines(solutions: Path = ROOT / "solutions") -> dict[str, str]:
    """Every line of every solution region that says something, stripped, mapped to where
    it is first (``solutions/<file>:<line>``)."""
    lines: dict[str, str] = {}
    for path in sorted(solutions.glob("*.py")):
        text = path.read_text()
        for region in REGION.finditer(text):
            first = text.count("\n", 0, region.start(1)) + 1
            for offset, line in enumerate(region.group(1).splitlines()):
                if len(WORD.findall(line)) >= 3 and not line.strip().startswith("#"):
                    lines.setdefault(line.strip(), f"solutions/{path.name}:{first + offset}")
    return lines


def _without_hidden(text: str) -> list[int]:
    """The line numbers (from 1) of ``text`` that ``handout.without_hidden_checks`` keeps."""
    cut: set[int] = set()
    for region in HIDDEN.finditer(text):
        first = text.count("\n", 0, region.start()) + 1
        cut.update(range(first, first + region.group(0).count("\n")))
    return [n for n in range(1, len(text.splitlines()) + 1) if n not in cut]


def _stub_lines(text: str) -> list[int]:
    """The line number of the key's file each line of its stub (``stubs.strip_solution``)
    comes from: a ``raise`` line comes from its region's BEGIN marker."""
    numbers, inside = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if BEGIN.match(line):
            inside = True
            numbers.append(number)
        elif END.match(line):
            inside = False
        elif not inside:
            numbers.append(number)
    return numbers


def _origin(relative: str, number: int, solutions: Path) -> str:
    """Where line ``number`` of the handout's file ``relative`` comes from in the kit."""
    parts = relative.split("/")
    source = ROOT / relative
    if parts[0] == "grader" and source.is_file():
        kept = _without_hidden(source.read_text())
        return f"{relative}:{kept[number - 1] if number <= len(kept) else '?'}"
    if parts[0] == "exercises" and (solutions / parts[-1]).is_file():
        kept = _stub_lines((solutions / parts[-1]).read_text())
        return f"solutions/{parts[-1]}:{kept[number - 1] if number <= len(kept) else '?'} " \
               "(outside its solution regions, so in the stub)"
    return f"{relative}:{number}"


def shared_lines(built: Path, solutions: Path = ROOT / "solutions") -> list[Shared]:
    """Every line of the handout in ``built`` that repeats a line of the key
    (``key_lines``), with the kit's file and line it comes from."""
    lines = key_lines(solutions)
    found = []
    for path in sorted(Path(built).rglob("*")):
        if not path.is_file():
            continue
        relative = path.relative_to(built).as_posix()
        for number, text in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if text.strip() in lines:
                found.append(Shared(f"{relative}:{number}", _origin(relative, number, solutions),
                                    lines[text.strip()], text.strip()))
    return found
