"""The docs' counts, tables, lists and report examples are the kit's own (``tools.regenerate``,
which ``make regenerate`` runs): each span ``<!-- course: KEY -->...<!-- /course -->`` in the
README and ``docs/*.md`` holds what the course gives for KEY, so adding an exercise cannot leave
"six optional exercises" or "60 points" behind; and each block ``<!-- report: ENTRY EXERCISE
[TRIM] -->`` is the real report of that zoo entry, trimmed as its marker says."""

from __future__ import annotations

import pytest

from tools import regenerate


def test_the_docs_counts_tables_and_lists_are_the_courses():
    generated = regenerate.spans()
    spans = [span for path in regenerate.DOCS for span in regenerate.SPAN.finditer(
        path.read_text())]
    assert {s["key"].lower() for s in spans} == set(generated)
    for span in spans:
        assert span["text"] == regenerate.span_text(span["key"], generated), (
            f"{span['key']} is stale: run make regenerate")


def blocks() -> list:
    return [block for path in regenerate.DOCS for block in regenerate.BLOCK.finditer(
        path.read_text())]


def test_the_docs_have_report_examples_and_trim_some():
    assert len(blocks()) >= 2
    assert {b["trim"].split("=")[0] for b in blocks() if b["trim"]} == {"checks", "check"}


@pytest.mark.parametrize("block", blocks(), ids=lambda b: b["entry"])
def test_each_report_example_is_the_real_report_trimmed_as_marked(block):
    assert block.group(0) == regenerate.report_block(block), (
        f"the {block['entry']} example is stale: run make regenerate")


REPORT = """exercise   score
total      1 / 3

== softmax ==
Likely mistake (x): a hint.
-- test_a (0/1)
   Property: A.
   Failed: a.
-- test_b (0/1)
   Property: B.
-- test_c (1/1)
   Property: C.
"""


def test_a_trim_keeps_the_checks_its_marker_names():
    assert regenerate.trim(REPORT, None) == REPORT
    assert regenerate.trim(REPORT, "checks=1") == REPORT.split("-- test_b")[0]
    assert regenerate.trim(REPORT, "checks=3") == REPORT
    assert regenerate.trim(REPORT, "check=test_b") == "-- test_b (0/1)\n   Property: B.\n"
    with pytest.raises(ValueError, match="no check test_d"):
        regenerate.trim(REPORT, "check=test_d")
    with pytest.raises(ValueError, match="has 3 checks"):
        regenerate.trim(REPORT, "checks=4")


def test_regenerate_check_finds_the_kit_fresh_and_refuses_an_unknown_exercise(capsys):
    assert regenerate.main(["--check"]) == 0
    assert capsys.readouterr().out == "up to date\n"
    with pytest.raises(SystemExit):
        regenerate.main(["--exercise", "no_such_exercise"])
    assert "unknown exercise no_such_exercise" in capsys.readouterr().err
