"""`make zoo`: grade every zoo entry and print the entry x exercise matrix.

Each entry changes one exercise file of the key. By default that exercise is graded, and the
other five cells come from one grading of the untouched key: their files are byte-identical to
it and each exercise is graded in its own worker with the references standing in for its
siblings, so they cannot score differently. ``--full`` grades all six exercises of every entry
instead. Hypothesis's shrink phase is skipped unless ``--shrink``: it changes which failing
input the feedback shows, never a score (see ``zoo.catalog.shrinking``).

    python tests/zoo/matrix.py [--full] [--shrink] [--processes N] [--feedback ENTRY ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from zoo.catalog import BY_NAME, ENTRIES, grade_key, grade_many  # noqa: E402

from grader.exercises import EXERCISE_NAMES  # noqa: E402

SHORT = {"softmax": "softmax", "softmax_backward": "backward", "attention": "attention",
         "heads": "heads", "mha": "mha", "kv_cache": "kv_cache"}


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="grade all six exercises per entry")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--shrink", action="store_true",
                        help="shrink counterexamples as real grading does (same scores, slow)")
    parser.add_argument("--feedback", nargs="*", default=[], metavar="ENTRY",
                        help="also print the terminal report of these entries")
    args = parser.parse_args(argv)

    key = grade_key()
    graded = grade_many(ENTRIES, processes=args.processes, shrink=args.shrink,
                        exercises=tuple(EXERCISE_NAMES) if args.full else None)
    width = max(len(e.name) for e in ENTRIES) + 2
    header = "".join(f"{SHORT[n]:>10}" for n in EXERCISE_NAMES)
    print(f"{'entry':<{width}}{'kind':<8}{header}  diagnosed (expected)")
    print("-" * (width + 8 + 10 * len(EXERCISE_NAMES) + 40))
    caught = diagnosed = full = 0
    bad = []
    for entry in ENTRIES:
        results = dict(key.exercises)
        results.update(graded[entry.name].exercises)
        ok, named_ok = verdict(entry, results)
        cells = ""
        for name in EXERCISE_NAMES:
            r = results[name]
            mark = "*" if name == entry.exercise else " "
            cells += f"{f'{r.score}/{r.max_score}{mark}':>10}"
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
    wrong = sum(e.kind == "wrong" for e in ENTRIES)
    named = sum(bool(e.expect) for e in ENTRIES)
    correct = len(ENTRIES) - wrong
    print()
    print("* the entry's own exercise; " + ("every exercise graded." if args.full else
          "the other cells are the untouched key's grading (files byte-identical)."))
    print(f"caught {caught}/{wrong} wrong, diagnosed {diagnosed}/{named} named, "
          f"correct {full}/{correct} full marks")
    if args.feedback:
        from grader import report

        for name in args.feedback:
            print(f"\n===== feedback for zoo entry {name} =====")
            print(report.render(graded[name]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
