"""What an exercise's worker sees of a submission: its ``.py`` files that keep the exercise's
source rule (``grader.core.delegation``), read and judged by the reader under the exercise's
limits (``grader.sandbox.readers``), never in the grading process."""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from ..sandbox import readers
from ..sandbox.isolation import Limits, Spent
from .delegation import OWN_WHY
from .delegation_verdicts import worded
from .exercise import Exercise


def build(folder: Path, view: Path, exercise: Exercise, limits: Limits,
          judge: Callable[[str | None], str | None] = lambda verdict: verdict,
          ) -> tuple[str | None, Spent]:
    """Fill ``view`` with what the exercise's worker may see of the submission in ``folder``:
    its ``.py`` files (helper packages included) that keep the exercise's source rule, less
    the exercises it may use (proxies stand for them) and those it may not import. Nothing
    else: no data file, no native library, no file that breaks the rule or that could not be
    read within the exercise's ``limits``, so nothing the rule refuses can run in the worker
    however it is imported. ``judge`` has the last word on each file's verdict.

    Returns why the exercise cannot be graded (its own file, or a module it imports, breaks the
    rule or could not be read), or None; and ``limits`` with the seconds the reading took,
    which are the student's (``Spent``)."""
    files = sorted(p for p in folder.rglob("*.py") if p.is_file())
    relative = {p: p.relative_to(folder) for p in files}
    # its modules by their top name and in full ("pkg", "pkg.sub"), and the exercises it uses
    own = frozenset({r.parts[0].removesuffix(".py") for r in relative.values()}
                    | {".".join(r.with_suffix("").parts[:-1] if r.name == "__init__.py"
                                else r.with_suffix("").parts) for r in relative.values()}
                    | set(exercise.uses))
    # The files the exercise can reach: its own, then those of each module a file read so far
    # imports (all of a package's: its files import each other relatively), round by round,
    # never the exercises it uses (proxies stand for them). No file can import by a name it
    # does not write (the rule forbids __import__ and importlib), so a file no reached file
    # names is never run, and is neither read nor put in the view: on d63756d every file was,
    # for every exercise, and 1,980 helper files no exercise imported cost the grading process
    # twice an honest submission's CPU (issue 36, red team). In each round its own file first,
    # then the smaller before the larger, so that a huge file (slow to read) takes the
    # exercise's time from none of the others.
    by_top: dict[str, list[str]] = {}
    for name in relative.values():
        top = name.parts[0].removesuffix(".py")
        if top not in exercise.uses or top == exercise.name:
            by_top.setdefault(top, []).append(name.as_posix())
    found: dict[str, readers.Read] = {}
    reached: set[str] = set()
    todo = [exercise.name]
    while todo:
        tops = sorted({top for top in todo if top in by_top} - reached)
        reached.update(tops)
        read = sorted((r for top in tops for r in by_top[top]),
                      key=lambda r: (r != exercise.filename, (folder / r).stat().st_size, r))
        if not read:
            break
        left = limits.timeout - sum(f.seconds for f in found.values())
        if left <= 0:  # the time went on the files before: none left for these
            found.update((r, readers.Read(readable=False)) for r in read)
            break
        this_round = readers.read_files(folder, read, exercise.rule, own,
                                        dataclasses.replace(limits, timeout=left))
        found.update(this_round)
        todo = [module for r in read for module in this_round[r].imports]
    spent = Spent(**{f.name: getattr(limits, f.name) for f in dataclasses.fields(Limits)},
                  spent=sum(f.seconds for f in found.values()))
    exports: dict[str, set[str]] = {}  # own module -> the names its files bind to a module
    for name, read in found.items():
        exports.setdefault(name.split("/")[0].removesuffix(".py"), set()).update(read.exports)
    left_out: dict[str, str] = {}
    shutil.rmtree(view, ignore_errors=True)
    view.mkdir(parents=True)
    for path, name in relative.items():
        top = name.parts[0].removesuffix(".py")
        if top != exercise.name and (top in exercise.uses or top in exercise.rule.siblings):
            continue
        this = found.get(name.as_posix())
        if this is None:  # no file the exercise reaches imports it: never run
            continue
        if not this.readable:
            left_out.setdefault(top, readers.unread(name.as_posix(), limits))
            continue
        verdict = judge(this.verdict or taken(this, exports))
        if verdict:
            left_out.setdefault(top, verdict if name.parts == (exercise.filename,)
                                else f"{name}: {verdict}")
            continue
        target = view / name
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(path, target)
    for path in [view, *view.rglob("*")]:
        if path.is_dir():
            os.chmod(path, 0o755)
    todo, seen = [exercise.name], set()
    while todo:  # its file, or a module it imports (or one of theirs), was left out: say why
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in left_out:
            return left_out[name], spent
        this = found.get(f"{name}.py")
        if this is not None and name not in exercise.uses:
            todo += this.imports
    return None, spent


def taken(read: readers.Read, exports: dict[str, set[str]]) -> str | None:
    """Why a file may not be graded for what it takes from the submission's own modules: a
    module one of them binds (``from .helper import np``, ``helper.np``), whose attributes
    no rule of this file's would see (the reader reads each file on its own)."""
    return worded([(line, 0, what, OWN_WHY) for module, name, line, what in read.takes
                   if name in exports.get(module, ())])
