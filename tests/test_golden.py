"""What a user reads does not change unless a change means it to: every output the kit writes
for the zoo (each entry's results.json with the instructor's part, and its report) and for a
class (``batch`` with a roster and both exports, then ``report`` from its JSON) is the one kept
under ``tests/golden/`` (``tests/golden.py``), byte for byte.

A change that is meant to change what a user reads regenerates them (``make regenerate``) and
its diff shows what changed."""

from __future__ import annotations

import golden
import pytest
from submission_tools import COURSE
from zoo.catalog import ENTRIES


def _explained(wrong: list[str]) -> str:
    return (f"{len(wrong)} outputs differ from tests/golden/ ({', '.join(wrong[:8])}"
            f"{' ...' if len(wrong) > 8 else ''}); if the change means it, run "
            "make regenerate and read the diff")


@pytest.mark.parametrize("exercise", COURSE.names())
def test_the_zoo_reads_as_it_did(exercise, zoo_graded):
    entries = {e.name for e in ENTRIES if e.exercise == exercise}
    wrong = golden.differences(golden.zoo_outputs(
        {name: zoo_graded[name] for name in entries}), entries)
    assert not wrong, _explained(wrong)


def test_every_golden_zoo_output_has_its_entry():
    outputs = {p.stem for p in (golden.GOLDEN / "zoo").iterdir()}
    assert outputs == {e.name for e in ENTRIES}, _explained(sorted(outputs ^ {
        e.name for e in ENTRIES}))


def test_a_class_reads_as_it_did(golden_class):
    wrong = golden.differences(golden_class)
    assert not wrong, _explained(wrong)
