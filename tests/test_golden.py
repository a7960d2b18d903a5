"""What a user reads does not change unless a change means it to: every output the kit writes
for the zoo (each entry's results.json with the instructor's part, and its report) and for a
class (``batch`` with a roster and both exports, then ``report`` from its JSON) is the one kept
under ``tests/golden/`` (``tests/golden.py``), byte for byte.

A change that is meant to change what a user reads regenerates them (``make regenerate``) and
its diff shows what changed."""

from __future__ import annotations

import golden


def _explained(wrong: list[str]) -> str:
    return (f"{len(wrong)} outputs differ from tests/golden/ ({', '.join(wrong[:8])}"
            f"{' ...' if len(wrong) > 8 else ''}); if the change means it, run "
            "make regenerate and read the diff")


def test_the_zoo_reads_as_it_did(zoo_graded):
    wrong = golden.differences(golden.zoo_outputs(zoo_graded))
    assert not wrong, _explained(wrong)


def test_a_class_reads_as_it_did(golden_class):
    wrong = golden.differences(golden_class)
    assert not wrong, _explained(wrong)
