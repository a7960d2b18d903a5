"""Outside solutions in the class report (issue 47): a student is flagged against an outside
file (the answer key, last year's class) only when far above the class's own scores with that
file, and the class report compares with the answer key by default.

On c6e9838 a match with an outside file was judged by the class's cut for pairs of students:
where the class's own pairs are far apart (each student departing from the key in other places),
every student whose heads was 0.75 to the key was flagged against it; and without
``--similarity-corpus`` nothing was compared with the key, so a class where three students
handed in the key word for word read "No pair of files stands out".
"""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import pytest
from disguises import recomment, rename
from submission_tools import COURSE, KIT, STUBS
from test_similarity import AUTHORS, pairs, write
from zoo.catalog import KEY

from grader.integrations.outputs import class_report, similarity
from grader.integrations.outputs.fingerprint import contract, fingerprint
from grader.integrations.routes.cli import main

STUDENTS = sorted(p.name for p in (KIT / "tests" / "similar").iterdir())  # ana ... eve
KEY_FILES = {name: (KEY / f"{name}.py").read_text() for name in COURSE.names()}


def flagged_students(found: similarity.Similarity) -> set[str]:
    return {who for p in found.pairs for group in p["groups"] for who in group
            if who != similarity.KEY}


def test_students_who_hand_in_the_key_are_flagged_against_it_and_no_one_else(tmp_path):
    """Three students hand in the key word for word and a fourth renamed and re-commented,
    among the five students of tests/similar/: each copy is flagged against the key in every
    exercise, and no honest student in any."""
    folders = {who: write(tmp_path, who, AUTHORS[who]) for who in STUDENTS}
    for who in ("kay", "kim", "kit"):
        folders[who] = write(tmp_path, who, KEY_FILES)
    folders["kate"] = write(tmp_path, "kate", {
        name: recomment(rename(text, name), name) for name, text in KEY_FILES.items()})
    found = similarity.compare(folders, COURSE, key=KEY)
    assert flagged_students(found) == {"kay", "kim", "kit", "kate"}
    against_key = {(p["groups"][0][0], p["exercise"]) for p in found.pairs
                   if p["students"][1] == similarity.KEY}
    assert against_key == {(who, name) for who in ("kate", "kay") for name in KEY_FILES}
    assert all(p["groups"][0] == ["kay", "kim", "kit"] for p in found.pairs
               if p["students"] == ["kay", similarity.KEY])
    class_report.build([], COURSE, tmp_path / "report", similar=found)
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "No pair of files stands out" not in summary
    assert "| kay (+2 with the same file) and answer key | softmax | 1.0 |" in summary
    assert "Every student was also compared with the answer key in solutions/ (no " \
           "--similarity-corpus was given; a pair with it is named 'answer key')." in summary


def heads_departing_from_the_key(places: tuple[int, ...]) -> str:
    """The key's heads written otherwise in ``places`` (of its 12 statements)."""
    statements = [  # (the key's, another way to write it)
        ("x = np.asarray(x)", "x = np.array(x, copy=False)"),
        ("if x.ndim != 3:", "if len(x.shape) != 3:"),
        ('    raise ValueError(f"split_heads expects (B, T, C), got shape {x.shape}")',
         '    raise ValueError(f"expected 3 axes, got {x.ndim}")'),
        ("b, t, c = x.shape", "b, t, c = x.shape[0], x.shape[1], x.shape[2]"),
        ("if n_head < 1 or c % n_head:", "if n_head <= 0 or c % n_head != 0:"),
        ('    raise ValueError(f"width {c} is not divisible by n_head={n_head}")',
         '    raise ValueError(f"{c} is not a multiple of {n_head}")'),
        ("return x.reshape(b, t, n_head, c // n_head).transpose(0, 2, 1, 3)",
         "return x.reshape(b, t, n_head, -1).swapaxes(1, 2)"),
        ("x = np.asarray(x)", "x = np.array(x, copy=False)"),
        ("if x.ndim != 4:", "if len(x.shape) != 4:"),
        ('    raise ValueError(f"merge_heads expects (B, H, T, D), got shape {x.shape}")',
         '    raise ValueError(f"expected 4 axes, got {x.ndim}")'),
        ("b, h, t, d = x.shape", "b, h, t, d = x.shape[0], x.shape[1], x.shape[2], x.shape[3]"),
        ("return x.transpose(0, 2, 1, 3).reshape(b, t, h * d)",
         "return x.swapaxes(1, 2).reshape(b, t, -1)")]
    lines = [f"    {pick[i in places]}\n" for i, pick in enumerate(statements)]
    return ('"""heads"""\nimport numpy as np\n\n\ndef split_heads(x, n_head):\n'
            + "".join(lines[:7]) + "\n\ndef merge_heads(x):\n" + "".join(lines[7:]))


# Four students, each writing three of the twelve statements their own way, no two the same
# statement: each is 0.66 to 0.86 to the key, and 0.29 to 0.65 to each other.
DEPARTURES = [(0, 4, 8), (1, 5, 9), (2, 6, 10), (3, 7, 11)]


def test_heads_as_everyone_writes_them_flags_no_one_against_the_key(tmp_path):
    """The four, among the five students of tests/similar/: the class's pairs are far apart
    (its cut for them 0.74), and on c6e9838 two of the four were flagged against the key by
    it (0.81, 0.86). Against the class's own scores with the key, no one stands out."""
    files = {f"student{n}": heads_departing_from_the_key(places)
             for n, places in enumerate(DEPARTURES)}
    given = contract((STUBS / "heads.py").read_text())
    _, scores = similarity.pair_scores([fingerprint(KEY_FILES["heads"], given),
                                        *(fingerprint(text, given) for text in files.values())])
    to_key = scores[0, 1:]
    among = [scores[i, j] for i, j in combinations(range(1, len(files) + 1), 2)]
    assert 0.65 < min(to_key) and max(to_key) < 0.9 and max(among) < COURSE.similarity
    folders = {who: write(tmp_path, who, {"heads": text}) for who, text in files.items()}
    folders |= {who: write(tmp_path, who, AUTHORS[who]) for who in STUDENTS}
    found = similarity.compare(folders, COURSE, key=KEY)
    assert found.exercises["heads"]["cut"] < max(to_key)  # the cut of the pairs of students
    assert found.pairs == []
    [key_heads] = found.exercises["heads"]["outside"]
    assert key_heads["source"] == [similarity.KEY] and key_heads["flagged"] == 0
    assert key_heads["cut"] > max(to_key)  # the class's scores with the key raised it
    # a copy of the key among them stands out, and is flagged
    folders["copier"] = write(tmp_path, "copier", {"heads": recomment(
        rename(KEY_FILES["heads"], "heads"), "heads")})
    found = similarity.compare(folders, COURSE, key=KEY)
    assert pairs(found) == {("answer key", "copier", "heads")}


def test_independent_authors_are_not_flagged_against_the_key(tmp_path):
    """The 28 independent authors other than the key (its zoo's correct entries, tests/similar/,
    the four public attention modules), with the key as the outside solution."""
    folders = {who: write(tmp_path, who, files) for who, files in AUTHORS.items()
               if who != "key"}
    assert len(folders) == 28
    found = similarity.compare(folders, COURSE, key=KEY)
    assert found.pairs == [] and found.outside == "key"
    assert all(o["flagged"] == 0 for e in found.exercises.values() for o in e["outside"])


def test_an_outside_file_with_too_few_students_to_judge_by_is_judged_by_the_floor(tmp_path):
    """Two students' files are no distribution: the floor alone, as for pairs of students."""
    folders = {"alice": write(tmp_path, "alice", {"attention": KEY_FILES["attention"]}),
               "bob": write(tmp_path, "bob", {"attention": AUTHORS["ana"]["attention"]})}
    found = similarity.compare(folders, COURSE, key=KEY)
    assert pairs(found) == {("alice", "answer key", "attention")}
    assert found.pairs[0]["cut"] == COURSE.similarity
    page = found.pages[found.pairs[0]["page"]]
    assert "Flagged from 0.7 (the course&#x27;s floor: too few files in this exercise to " \
           "compare with the class)." in page


@pytest.mark.parametrize("named_corpus", [False, True])
def test_the_report_command_compares_with_the_key_unless_a_corpus_is_named(tmp_path,
                                                                          named_corpus):
    for who in ("alice", "bob", "cy"):
        write(tmp_path / "class", who, {"softmax": KEY_FILES["softmax"]})
    write(tmp_path / "corpus", "2023", {"attention": KEY_FILES["attention"]})
    (tmp_path / "json").mkdir()
    command = ["report", str(tmp_path / "json"), "--out", str(tmp_path / "out"),
               "--submissions", str(tmp_path / "class")]
    if named_corpus:
        command += ["--similarity-corpus", str(tmp_path / "corpus")]
    assert main(command) == 0
    found = json.loads((tmp_path / "out" / "summary.json").read_text())["similarity"]
    markdown = (tmp_path / "out" / "summary.md").read_text()
    if named_corpus:  # the corpus the instructor named, and not the key
        assert found["outside"] == "corpus" and found["pairs"] == []
        assert "compared with the outside solutions of --similarity-corpus" in markdown
    else:
        assert found["outside"] == "key"
        assert [p["groups"] for p in found["pairs"]] == [[["alice", "bob", "cy"],
                                                          ["answer key"]]]
        assert "compared with the answer key in solutions/" in markdown


def test_the_report_names_each_outside_file_the_class_is_close_to(tmp_path):
    """Where the class's scores with an outside file raise its cut, the report says so, with
    the numbers: an instructor sees why a student at 0.75 to the key is not flagged."""
    folders = {f"student{n}": write(tmp_path, f"student{n}", {
        "heads": heads_departing_from_the_key(places)}) for n, places in enumerate(DEPARTURES)}
    found = similarity.compare(folders, COURSE, key=KEY)
    class_report.build([], COURSE, tmp_path / "report", similar=found)
    markdown = (tmp_path / "report" / "summary.md").read_text()
    index = (tmp_path / "report" / "index.html").read_text()
    [row] = [line for line in markdown.splitlines() if line.startswith("| heads | answer key")]
    cut = found.exercises["heads"]["outside"][0]["cut"]
    assert row.endswith(f"| {cut} | 0 |") and cut > COURSE.similarity
    assert "<h3>Outside files judged against the class's scores with them</h3>" in index
    assert Path(tmp_path / "report" / "summary.json").is_file()


def test_a_class_that_hands_in_the_key_is_said_to(tmp_path):
    """Five students hand in the key's attention, each renamed and re-commented, beside ana
    and ben: most of the class is the key, so none stands out against it, and the report
    says so rather than "No pair of files stands out" alone."""
    folders = {who: write(tmp_path, who, {"attention": recomment(rename(
        KEY_FILES["attention"] + f"\n\ndef helper_{n}(x):\n    return x\n", "attention"),
        "attention")}) for n, who in enumerate(["s0", "s1", "s2", "s3", "s4"])}
    folders |= {who: write(tmp_path, who, {"attention": AUTHORS[who]["attention"]})
                for who in ("ana", "ben")}
    found = similarity.compare(folders, COURSE, key=KEY)
    assert not [p for p in found.pairs if p["students"][1] == similarity.KEY]
    class_report.build([], COURSE, tmp_path / "report", similar=found)
    assert "Half the students' files or more are as close to attention's answer key as a " \
           "flagged file would be" in (tmp_path / "report" / "summary.md").read_text()
