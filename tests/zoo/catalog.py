"""The bug zoo, discovered from its files: ``wrong/`` and ``correct/`` under this folder.

A zoo submission is a copy of the answer key (``solutions/``) with the entry's file in place of
one exercise's file. Every entry file starts with one line that says what it is::

    # zoo: attention names mask-after-softmax   (a wrong entry the grader must diagnose)
    # zoo: attention                            (a wrong entry nothing names, or a correct one)

Wrong entries are patches of the key, ``wrong/<name>.patch`` (unified diffs whose added lines
carry a ``# BUG:`` comment), applied where their text is, not at their line numbers: they follow
the key when lines elsewhere in it move, and fail loudly when the lines they change do;
a wrong entry that rewrites most of the file may be a whole file, ``wrong/<name>.py``. Correct
entries are whole files, ``correct/<name>.py``, written in a style unlike the key's. Adding an
entry is adding a file: nothing else names it. ``python tests/zoo/catalog.py EXERCISE ENTRY
MISTAKEN [--names ID]`` writes a patch from a copy of the key's file with the mistake made in
it (``write_patch``).
"""

from __future__ import annotations

import difflib
import multiprocessing
import re
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ZOO = Path(__file__).resolve().parent
KEY = ZOO.parent.parent / "solutions"
HEADER = re.compile(r"^# zoo: (?P<exercise>\w+)(?: names (?P<expect>[\w-]+))?\n")


@dataclass(frozen=True)
class Entry:
    name: str
    exercise: str
    kind: str  # "wrong" or "correct"
    file: Path  # a wrong entry's patch of the key's file, or a whole file
    expect: str | None = None  # the misconception id the grader must name, if any

    def source(self) -> str:
        """The exercise file this entry submits."""
        text = HEADER.sub("", self.file.read_text(), count=1)
        if self.file.suffix == ".patch":
            return apply_patch((KEY / f"{self.exercise}.py").read_text(), text)
        return text

    @property
    def what(self) -> str:
        """The entry's one-line description: its ``# BUG:`` comment, or its docstring."""
        text = self.source()
        if "# BUG:" in text:
            return text.split("# BUG:", 1)[1].splitlines()[0].strip()
        return text.split('"""', 2)[1].split("\n")[0].strip()


def discover() -> tuple[Entry, ...]:
    entries = []
    for kind in ("wrong", "correct"):
        for path in sorted((ZOO / kind).iterdir()):
            if path.suffix not in (".patch", ".py"):
                continue
            header = HEADER.match(path.read_text())
            if header is None:
                raise ValueError(f"{path}: the first line must be '# zoo: EXERCISE [names ID]'")
            entries.append(Entry(path.stem, header["exercise"], kind, path, header["expect"]))
    return tuple(entries)


ENTRIES: tuple[Entry, ...] = discover()
BY_NAME = {e.name: e for e in ENTRIES}
WRONG = tuple(e for e in ENTRIES if e.kind == "wrong")
CORRECT = tuple(e for e in ENTRIES if e.kind == "correct")
NAMED = tuple(e for e in WRONG if e.expect)


def build(entry: Entry, folder: Path) -> Path:
    """Write the entry's submission into ``folder``: the key, with one file replaced."""
    submission = Path(folder) / entry.name
    submission.mkdir(parents=True)
    for path in sorted(KEY.glob("*.py")):
        shutil.copyfile(path, submission / path.name)
    (submission / f"{entry.exercise}.py").write_text(entry.source())
    return submission


def make_patch(old: str, new: str, exercise: str, names: str | None = None) -> str:
    """A wrong entry's whole file: its ``# zoo:`` line (``names`` the misconception the grader
    must name, if any), then a unified diff from ``old`` (the key's file) to ``new`` (the
    mistaken one), with two lines of context."""
    header = f"# zoo: {exercise}" + (f" names {names}" if names else "") + "\n"
    return header + "".join(difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True),
        f"solutions/{exercise}.py", f"solutions/{exercise}.py", n=2,
    ))


def write_patch(exercise: str, entry: str, mistaken: Path, names: str | None = None) -> Path:
    """Write ``wrong/<entry>.patch``: the key's file of ``exercise`` to the file ``mistaken``
    (``make_patch``). ValueError when the patch would not give ``mistaken`` back, or no added
    line carries its ``# BUG:`` comment."""
    new = Path(mistaken).read_text()
    text = make_patch((KEY / f"{exercise}.py").read_text(), new, exercise, names)
    if "# BUG:" not in "".join(line for line in text.splitlines(keepends=True)
                               if line.startswith("+")):
        raise ValueError(f"{mistaken}: mark the mistake with a '# BUG: what it does wrong' "
                         "comment on a line it changes")
    if apply_patch((KEY / f"{exercise}.py").read_text(), HEADER.sub("", text, count=1)) != new:
        raise ValueError(f"{mistaken}: the patch does not give the file back")
    path = ZOO / "wrong" / f"{entry}.patch"
    path.write_text(text)
    return path


def apply_patch(old: str, patch: str) -> str:
    """Apply a unified diff made by ``make_patch``, each hunk where its text is: its context
    and removed lines, in order, found in the key at or after the previous hunk (the nearest
    to the line its header names, if they appear twice). Line numbers only break ties, so
    wrapping a line elsewhere in the key moves the hunks and breaks none; a hunk whose lines
    are no longer in the key fails loudly instead of drifting."""
    lines = old.splitlines(keepends=True)
    out: list[str] = []
    position = 0  # next line of ``old`` not yet copied
    hunks = re.split(r"^(@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@.*\n)", patch, flags=re.M)
    for number, (header_start, body) in enumerate(zip(hunks[2::3], hunks[3::3]), start=1):
        body_lines = [line for line in body.splitlines(keepends=True)
                      if not line.startswith("\\")]
        before = [line[1:] for line in body_lines if line[:1] in (" ", "-")]
        stated = max(int(header_start) - 1, 0)
        found = [i for i in range(position, len(lines) - len(before) + 1)
                 if lines[i:i + len(before)] == before]
        if not found:
            raise ValueError(f"hunk {number} of the patch does not fit the key: its lines "
                             f"{before[:1]!r}... are not in it (after line {position + 1})")
        start = min(found, key=lambda i: (abs(i - stated), i))
        out += lines[position:start]
        position = start
        for line in body_lines:
            tag, text = line[:1], line[1:]
            if tag in (" ", "-"):
                position += 1
                if tag == " ":
                    out.append(text)
            elif tag == "+":
                out.append(text)
    return "".join(out + lines[position:])


def graded_exercises(entry: Entry) -> list[str]:
    """A core entry is graded with every core exercise, as a student's submission is; a bonus
    entry on its own exercise (the others are independent workers: they would prove nothing
    more and cost minutes)."""
    from grader.core.course import load

    course = load(KEY.parent / "course.toml")
    return course.names("core") if course.track(entry.exercise) == "core" else [entry.exercise]


def grade_entry(entry: Entry, key=None):
    """Grade the entry's submission with the real grading profile (shrinking included) and the
    default limits. With ``key`` (the answer key's ``SubmissionResult``, graded as a
    submission), only the entry's own exercise is graded and the key's results stand for the
    other core exercises, whose files are the key's: each exercise is graded in workers of its
    own, and no exercise's grade reads another's file (an import of another exercise is
    answered by the key), so grading them again for every entry gives the key's results again
    and costs most of the zoo's time. ``tests/golden/zoo/`` was written grading every entry in
    whole, and ``test_golden`` holds the two to the same bytes."""
    import copy
    import dataclasses

    from grader.core.course import load
    from grader.core.engine import grade_submission

    course = load(KEY.parent / "course.toml")
    names = graded_exercises(entry)
    with tempfile.TemporaryDirectory(prefix="zoo-") as tmp:
        graded = grade_submission(build(entry, Path(tmp)), course=course,
                                  exercises=names if key is None else [entry.exercise])
    if key is None or names == [entry.exercise]:
        return graded
    results = {name: graded.results[name] if name == entry.exercise
               else copy.deepcopy(key.results[name]) for name in names}
    return dataclasses.replace(graded, results=results)


def grade_key():
    """The answer key graded as a submission, on the core exercises (``grade_entry``'s
    ``key``)."""
    from grader.core.course import load
    from grader.core.engine import grade_submission

    course = load(KEY.parent / "course.toml")
    return grade_submission(KEY, course=course, exercises=course.names("core"))


def grade_many(entries, *, processes: int = 2, whole: bool = False, key=None) -> dict:
    """Grade every entry, ``processes`` entries at a time: each core entry's own exercise beside
    the key's results for the others (``grade_entry``; ``key``: the key's grade, if made
    already), or, ``whole``, every exercise of every entry's submission."""
    key = None if whole else key or grade_key()
    if processes <= 1:
        return {e.name: grade_entry(e, key) for e in entries}
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(processes, mp_context=context) as pool:
        futures = {e.name: pool.submit(grade_entry, e, key) for e in entries}
        return {name: future.result() for name, future in futures.items()}


def main(argv: list[str] | None = None) -> int:
    """``python tests/zoo/catalog.py EXERCISE ENTRY MISTAKEN [--names ID]``: write a wrong
    entry, ``wrong/ENTRY.patch``, from a copy of the key's file with the mistake made in it."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    parser.add_argument("exercise")
    parser.add_argument("entry", help="the entry's name: <exercise>_<what it does wrong>")
    parser.add_argument("mistaken", type=Path, help="the key's file with the mistake in it")
    parser.add_argument("--names", metavar="ID", help="the misconception it makes, if named")
    args = parser.parse_args(argv)
    if not (KEY / f"{args.exercise}.py").is_file():
        parser.error(f"no solutions/{args.exercise}.py")
    if not re.fullmatch(r"\w+", args.entry):
        parser.error(f"{args.entry}: an entry's name is letters, digits and _")
    try:
        path = write_patch(args.exercise, args.entry, args.mistaken, args.names)
    except ValueError as error:
        parser.error(str(error))
    print(f"wrote {path.relative_to(KEY.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
