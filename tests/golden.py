"""What a user reads, kept byte for byte: the outputs the kit wrote for the zoo and a class,
checked in under ``tests/golden/`` and compared by ``tests/test_golden.py``.

- ``zoo/<entry>.json``: each zoo entry's results.json with the instructor's part (what
  ``batch --json-dir`` writes), and ``zoo/<entry>.txt``: its report with the printed output
  (``grade --show-output``), the submission's path written as ``SUBMISSION``;
- ``class/``: the golden class (``write_class``) graded by ``batch`` with a roster and both
  exports (the CSV, every ``<student>.json``, the exports, the report and its pages), then its
  report again from the JSON (``report``).

A change that is meant to change what a user reads regenerates them, and the diff is part of
the change: ``make regenerate`` writes them all again (``make regenerate EXERCISE=NAME``: the
zoo entries graded with that exercise, and the class).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import demo_class

TESTS = Path(__file__).resolve().parent
KIT = TESTS.parent
GOLDEN = TESTS / "golden"
CALL_TIMEOUT = "0.5"  # the hang (cy's split_heads) stops at this call limit, as in the demo's test

ROSTER = """folder,id,name,email,section
ana,1001,Ana Alves,ana@example.edu,A
ben,1002,Ben Brook,ben@example.edu,A
cy,1003,Cy Cole,cy@example.edu,B
dee,1004,Dee Dunn,dee@example.edu,B
eve,1005,Eve Earl,eve@example.edu,A
fay,1006,Fay Ford,fay@example.edu,B
gus,1007,Gus Gray,gus@example.edu,A
ivy,1009,Ivy Isle,ivy@example.edu,B
"""


def _renderers():
    """The report's two renderings of one submission, where this kit keeps them."""
    try:
        from grader.integrations.outputs import report
    except ImportError:
        from grader.integrations import report  # type: ignore[no-redef]
    return report


def zoo_outputs(graded: dict) -> dict[str, str]:
    """``zoo/<entry>.json`` and ``.txt`` for every entry of ``graded`` (entry -> the
    ``SubmissionResult`` the zoo's grade gave)."""
    import json

    report = _renderers()
    files = {}
    for name, result in sorted(graded.items()):
        data = report.to_json(result, include_output=True)
        files[f"zoo/{name}.json"] = json.dumps(data, indent=2, sort_keys=True) + "\n"
        text = report.render(result, show_output=True).replace(result.path, "SUBMISSION")
        files[f"zoo/{name}.txt"] = text + "\n"
    return files


def write_class(folder: Path) -> Path:
    """The golden class under ``folder / "class"``: the demo class (tests/demo_class.py), gus
    (the whole key, the bonus track included, one bonus file left as its stub) and hal (an
    empty folder); the roster lists ivy, who submitted nothing, and not hal."""
    root = folder / "class"
    demo_class.write(root)
    gus = root / "gus"
    gus.mkdir()
    for path in sorted((KIT / "solutions").glob("*.py")):
        (gus / path.name).write_text(path.read_text())
    (gus / "rope.py").write_text((KIT / "exercises" / "rope.py").read_text())
    (root / "hal").mkdir()
    (folder / "roster.csv").write_text(ROSTER)
    return root


def class_outputs(folder: Path) -> dict[str, str]:
    """Grade the golden class in ``folder`` (made by ``write_class``) with ``batch``, then its
    report again from the JSON with ``report``; every file they wrote, by its golden name."""
    root = folder / "class"
    out = folder / "out"
    grader = [sys.executable, "-m", "grader"]
    batch = [*grader, "batch", str(root), "--csv", str(out / "grades.csv"), "--json-dir",
             str(out / "json"), "--report", str(out / "report"), "--roster",
             str(folder / "roster.csv"), "--export", "canvas", str(out / "canvas.csv"),
             "--export", "gradescope", str(out / "gradescope.csv"), "--call-timeout",
             CALL_TIMEOUT, "--jobs", "2"]
    again = [*grader, "report", str(out / "json"), "--csv", str(out / "grades.csv"), "--out",
             str(out / "report-again"), "--submissions", str(root)]
    for command in (batch, again):
        done = subprocess.run(command, cwd=KIT, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr}")
    files = {}
    for path in sorted(out.rglob("*")):
        relative = path.relative_to(out)
        if path.is_file() and not any(part.startswith(".") for part in relative.parts):
            files[f"class/{relative.as_posix()}"] = path.read_text(encoding="utf-8")
    return files


def differences(found: dict[str, str], entries: set[str] | None = None) -> list[str]:
    """The golden files that ``found`` does not reproduce byte for byte (or lacks, or adds);
    of the zoo's, those of ``entries`` only, when given."""
    kept = {p.relative_to(GOLDEN).as_posix() for p in GOLDEN.rglob("*") if p.is_file()}
    prefixes = {name.split("/")[0] for name in found}
    kept = {name for name in kept if name.split("/")[0] in prefixes and (
        entries is None or not name.startswith("zoo/") or Path(name).stem in entries)}
    wrong = [name for name in sorted(set(found) & kept)
             if (GOLDEN / name).read_text(encoding="utf-8") != found[name]]
    return (wrong + [f"{name} (not written)" for name in sorted(kept - set(found))]
            + [f"{name} (new)" for name in sorted(set(found) - kept)])


def save(found: dict[str, str], replaced: set[str] | None = None) -> None:
    """Write ``found`` under ``tests/golden/``. Each of its top folders is replaced whole, but
    for the zoo's when ``replaced`` names the entries regraded: their files are replaced, and
    those of entries no longer in the zoo removed."""
    import shutil

    from zoo.catalog import BY_NAME

    for prefix in {name.split("/")[0] for name in found}:
        if prefix == "zoo" and replaced is not None:
            for path in sorted((GOLDEN / prefix).glob("*")):
                if path.stem in replaced or path.stem not in BY_NAME:
                    path.unlink()
        else:
            shutil.rmtree(GOLDEN / prefix, ignore_errors=True)
    for name, text in found.items():
        (GOLDEN / name).parent.mkdir(parents=True, exist_ok=True)
        (GOLDEN / name).write_text(text, encoding="utf-8")


def write(exercises: list[str] | None = None) -> int:
    """Grade the zoo and the golden class and write what they give under ``tests/golden/``:
    every entry, or with ``exercises`` the entries graded with one of them (its own entries,
    and every core entry when it is a core exercise: a core entry's report lists them all).
    Returns the number of files written."""
    import os
    import tempfile

    os.environ["ATTENTION_KIT_SECRET"] = ""  # as the kit's tests grade (tests/conftest.py)
    from zoo.catalog import ENTRIES, grade_many, graded_exercises

    entries = [e for e in ENTRIES
               if exercises is None or set(exercises) & set(graded_exercises(e))]
    found = zoo_outputs(grade_many(entries, processes=2, whole=True))
    with tempfile.TemporaryDirectory(prefix="attention-kit-golden-") as tmp:
        write_class(Path(tmp))
        found |= class_outputs(Path(tmp))
    save(found, None if exercises is None else {e.name for e in entries})
    return len(found)


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description="write tests/golden/ again (make regenerate "
                                                 "does, with the stubs and the docs)")
    parser.add_argument("--exercise", action="append", default=[], metavar="NAME",
                        help="regrade only the zoo entries graded with this exercise")
    args = parser.parse_args(argv)
    count = write(args.exercise or None)
    print(f"wrote {count} files under {GOLDEN.relative_to(KIT)}/")


if __name__ == "__main__":
    main()
