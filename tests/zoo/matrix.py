"""`make zoo`: grade every zoo entry and print the entry x exercise matrix.

Each entry is the answer key with one exercise file changed; a core entry is graded with every
core exercise exactly as a student's submission is, a bonus entry on its own exercise.

    python tests/zoo/matrix.py [--processes N] [--exercise NAME ...] [--feedback ENTRY ...]

``make zoo EXERCISE=rope`` grades the entries of one exercise only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader.core.course import load  # noqa: E402
from grader.core.plural import noun  # noqa: E402
from zoo.catalog import ENTRIES, KEY, grade_many  # noqa: E402

COURSE = load(KEY.parent / "course.toml")
SCORES = Path(__file__).resolve().parent / "scores.json"
COLUMNS = COURSE.names()


def verdict(entry, results) -> tuple[bool, bool | None]:
    """(as expected, diagnosed as expected or None when the entry is not named)."""
    own = results[entry.exercise]
    others_full = all(r.score == r.max_score and not r.misconceptions
                      for name, r in results.items() if name != entry.exercise)
    if entry.kind == "correct":
        return own.score == own.max_score and not own.misconceptions and others_full, None
    expected_ids = [entry.expect] if entry.expect else []
    caught = own.score < own.max_score and others_full
    return caught, (own.misconceptions == expected_ids) if entry.expect else None


def select(exercises: list[str]) -> list:
    """The zoo's entries of ``exercises`` (all of them when none is named)."""
    return [e for e in ENTRIES if not exercises or e.exercise in exercises]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--feedback", nargs="*", default=[], metavar="ENTRY",
                        help="also print the terminal report of these entries")
    parser.add_argument("--record", action="store_true",
                        help="write every check's points to tests/zoo/scores.json")
    parser.add_argument("--exercise", action="append", default=[], metavar="NAME",
                        help="only the entries of this exercise (repeatable)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.exercise) - set(COLUMNS))
    if unknown:
        parser.error(f"unknown {noun(len(unknown), 'exercise')} "
                     f"{', '.join(unknown)}: one of {', '.join(COLUMNS)}")
    entries = select(args.exercise)

    graded = grade_many(entries, processes=args.processes)
    if args.record:  # the entries graded now replace theirs; the others keep theirs
        scores = json.loads(SCORES.read_text()) if args.exercise and SCORES.is_file() else {}
        scores.update({name: {ex: {c.name: c.points for c in r.checks}
                              for ex, r in g.results.items()} for name, g in graded.items()})
        SCORES.write_text(json.dumps(scores, indent=1, sort_keys=True) + "\n")
        print(f"wrote {SCORES}")
    width = max(len(e.name) for e in entries) + 2
    header = "".join(f"{n[:9]:>10}" for n in COLUMNS)
    print(f"{'entry':<{width}}{'kind':<8}{header}  diagnosed (expected)")
    print("-" * (width + 8 + 10 * len(COLUMNS) + 40))
    caught = diagnosed = full = 0
    bad = []
    for entry in entries:
        results = graded[entry.name].results
        ok, named_ok = verdict(entry, results)
        cells = ""
        for name in COLUMNS:
            r = results.get(name)
            mark = "*" if name == entry.exercise else " "
            cells += f"{f'{r.score}/{r.max_score}{mark}' if r else '':>10}"
        ids = ",".join(results[entry.exercise].misconceptions) or "-"
        expected = f" ({entry.expect})" if entry.expect else ""
        flag = "" if ok and named_ok is not False else "   <-- NOT AS EXPECTED"
        print(f"{entry.name:<{width}}{entry.kind:<8}{cells}  {ids}{expected}{flag}")
        if entry.kind == "wrong":
            caught += ok
            diagnosed += bool(named_ok)
        else:
            full += ok
        if flag:
            bad.append(entry.name)
    wrong = sum(e.kind == "wrong" for e in entries)
    named = sum(bool(e.expect) for e in entries)
    correct = len(entries) - wrong
    print()
    print("* the entry's own exercise (a core entry's other files are the key's, graded too)")
    print(f"caught {caught}/{wrong} wrong, diagnosed {diagnosed}/{named} named, "
          f"correct {full}/{correct} full marks")
    if args.feedback:
        from grader.integrations.outputs import report

        for name in args.feedback:
            print(f"\n===== feedback for zoo entry {name} =====")
            print(report.render(graded[name]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
