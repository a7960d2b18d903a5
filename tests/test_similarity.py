"""Similar submissions in the class report: copies flagged however they are disguised, and
independent work left alone, however alike the task makes it.

The independent authors: the answer key, the zoo's correct entries, five students in
``tests/similar/`` who wrote every core exercise and two bonus ones each in a style of their own
(ana: loops; ben: einsum; cy: as few lines as will do, docstrings deleted; dee: helpers and
classes; eve: the handout's own words and names), each graded full marks, and the attention
modules of nanoGPT, minGPT, the Annotated Transformer and a CS336 solution (as
``test_delegation`` holds them). The disguises are ``tests/disguises.py``'s.

Small classes, compared by ``similarity.compare`` directly: no grading needed.
"""

from __future__ import annotations

import ast
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from disguises import DISGUISES, all_five
from submission_tools import COURSE, KIT, STUBS
from test_delegation import ANNOTATED, CS336, MINGPT, NANOGPT
from zoo.catalog import CORRECT, KEY

from grader.integrations.outputs import class_page, class_report, similarity
from grader.integrations.outputs.fingerprint import contract, fingerprint
from grader.integrations.routes.cli import main

HOSTILE = "<script>alert(1)</script>"
STUDENTS = KIT / "tests" / "similar"
GUIDE = KIT / "docs" / "instructors.md"  # where the instructors read the measured scores


def write(root: Path, student: str, files: dict[str, str]) -> Path:
    folder = root / student
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / f"{name}.py").write_text(text)
    return folder


def authors() -> dict[str, dict[str, str]]:
    """Every independent author's files: exercise -> text."""
    found = {"key": {n: (KEY / f"{n}.py").read_text() for n in COURSE.names()}}
    for entry in CORRECT:
        found[entry.name] = {entry.exercise: entry.source()}
    for folder in sorted(STUDENTS.iterdir()):
        found[folder.name] = {p.stem: p.read_text() for p in sorted(folder.glob("*.py"))}
    for name, text in [("nanogpt", NANOGPT), ("mingpt", MINGPT), ("annotated", ANNOTATED),
                       ("cs336", CS336)]:
        found[name] = {"mha": text}
    return found


AUTHORS = authors()


@pytest.fixture(scope="module")
def independent(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("independent")
    return {who: write(root, who, files) for who, files in AUTHORS.items()}


def pairs(found: similarity.Similarity) -> set[tuple[str, str, str]]:
    return {(*sorted(p["students"]), p["exercise"]) for p in found.pairs}


def all_scores(files: dict[str, dict[str, str]]) -> dict[tuple[str, str, str], float]:
    """Every pair of authors' score, exercise by exercise."""
    out = {}
    for name in COURSE.names():
        given = contract((STUBS / f"{name}.py").read_text())
        who = sorted(w for w in files if name in files[w])
        _, scores = similarity.pair_scores([fingerprint(files[w][name], given) for w in who])
        for i, j in zip(*np.triu_indices(len(who), 1)):
            out[(who[i], who[j], name)] = float(scores[i, j])
    return out


# -- independent work ---------------------------------------------------------------------------
def test_independent_correct_solutions_are_not_flagged(independent):
    """With copydetect's scores the kit flagged 4 of these 246 pairs, none of whom saw the other's
    code: ben's heads and the key's (0.839), ana's and eve's attention_backward (0.733) and
    softmax_backward (0.706), eve's heads and the key's (0.705)."""
    found = similarity.compare(independent, COURSE)
    assert found.threshold == COURSE.similarity
    assert found.pairs == [] and found.pages == {} and found.identical == []


def test_a_few_alike_lines_are_no_evidence(tmp_path):
    """A three-line softmax is the same whoever writes it: two students who wrote it are not a
    pair (the kit flagged them: 1.0)."""
    bodies = {"ada": "e = np.exp(logits - logits.max(axis=axis, keepdims=True))\n"
                     "    return e / e.sum(axis=axis, keepdims=True)",
              "bo": "z = np.exp(logits - np.max(logits, axis=axis, keepdims=True))\n"
                    "    return z / np.sum(z, axis=axis, keepdims=True)",
              "cat": "shifted = np.exp(logits - logits.max(axis=axis, keepdims=True))\n"
                     "    return shifted / shifted.sum(axis=axis, keepdims=True)"}
    stub = (STUBS / "softmax.py").read_text()
    folders = {who: write(tmp_path, who, {"softmax": re.sub(
        r"raise NotImplementedError\(.*\)", body, stub)}) for who, body in bodies.items()}
    found = similarity.compare(folders, COURSE)
    assert found.pairs == []
    assert found.exercises["softmax"]["files"] == 3


def test_where_a_whole_class_writes_alike_only_what_stands_out_is_flagged(tmp_path):
    """Eight students write heads each departing from the common way in two places of twelve:
    14 of their 28 pairs reach the course's floor (0.7; up to 0.89) and are not flagged; a
    disguised copy of one of them stands out from the class and is."""
    choices = [("x = np.asarray(x)", "x = np.array(x, copy=False)"),
               ("if x.ndim != 3:", "if len(x.shape) != 3:"),
               ('raise ValueError("x must be (B, T, C)")',
                'raise ValueError(f"expected 3 axes, got {x.ndim}")'),
               ("b, t, c = x.shape", "b, t, c = x.shape[0], x.shape[1], x.shape[2]"),
               ("if n_head < 1 or c % n_head:", "if n_head <= 0 or c % n_head != 0:"),
               ('raise ValueError("n_head must divide C")',
                'raise ValueError(f"{c} is not a multiple of {n_head}")'),
               ("return x.reshape(b, t, n_head, c // n_head).transpose(0, 2, 1, 3)",
                "return x.reshape(b, t, n_head, -1).swapaxes(1, 2)"),
               ("x = np.asarray(x)", "x = np.array(x, copy=False)"),
               ("if x.ndim != 4:", "if len(x.shape) != 4:"),
               ('raise ValueError("x must be (B, H, T, D)")',
                'raise ValueError(f"expected 4 axes, got {x.ndim}")'),
               ("b, h, t, d = x.shape",
                "b, h, t, d = x.shape[0], x.shape[1], x.shape[2], x.shape[3]"),
               ("return x.transpose(0, 2, 1, 3).reshape(b, t, h * d)",
                "return x.swapaxes(1, 2).reshape(b, t, -1)")]
    departures = [(0, 5), (1, 8), (2, 11), (3, 6), (4, 9), (7, 10), (0, 11), (5, 9)]
    files = {}
    for number, places in enumerate(departures):
        lines = [pick[i in places] for i, pick in enumerate(choices)]
        body = ["    " * line.startswith("raise") + line for line in lines]
        files[f"student{number}"] = ('"""heads"""\nimport numpy as np\n\n\n'
                                     "def split_heads(x, n_head):\n"
                                     + "".join(f"    {line}\n" for line in body[:7])
                                     + "\n\ndef merge_heads(x):\n"
                                     + "".join(f"    {line}\n" for line in body[7:]))
    files["copier"] = all_five(files["student3"], "heads")
    scores = all_scores({who: {"heads": text} for who, text in files.items()})
    alike = [s for (a, b, _), s in scores.items() if "copier" not in (a, b)]
    assert max(alike) >= 0.85 and sum(s >= COURSE.similarity for s in alike) >= 10
    found = similarity.compare({w: write(tmp_path, w, {"heads": t}) for w, t in files.items()},
                               COURSE)
    assert pairs(found) == {("copier", "student3", "heads")}
    assert found.exercises["heads"]["cut"] > max(alike)


def test_a_class_that_hands_in_one_code_is_named_and_no_pair_of_it_flagged(tmp_path):
    """Five students hand in the key's softmax, each with a comment of their own: no pair
    stands out from the others (the kit flagged all ten), and the report says so."""
    source = (KEY / "softmax.py").read_text()
    folders = {f"s{n}": write(tmp_path, f"s{n}", {"softmax": f"{source}# by s{n}\n"})
               for n in range(5)}
    found = similarity.compare(folders, COURSE)
    assert found.pairs == [] and found.exercises["softmax"]["median"] == 1.0
    class_report.build([], COURSE, tmp_path / "report", similar=found)
    assert "In softmax, half the pairs of files or more are as alike as a flagged pair" in (
        tmp_path / "report" / "summary.md").read_text()


# -- copies ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("disguise", list(DISGUISES))
def test_disguised_copies_are_flagged_with_their_source_and_nothing_else(independent, tmp_path,
                                                                          disguise):
    copies = {f"copy-of-{who}": write(tmp_path, f"copy-of-{who}", {
        name: DISGUISES[disguise](text, name) for name, text in files.items()})
        for who, files in AUTHORS.items()}
    found = similarity.compare({**independent, **copies}, COURSE)
    assert pairs(found) == {(*sorted([who, f"copy-of-{who}"]), name)
                            for who, files in AUTHORS.items() for name in files}
    scores = [p["score"] for p in found.pairs]
    assert scores == sorted(scores, reverse=True) and min(scores) >= COURSE.similarity
    assert sorted(found.pages) == sorted(p["page"] for p in found.pairs)


def test_the_guide_states_the_measured_scores():
    """The instructors' guide: the highest score of two independent authors, the lowest of a
    disguised copy with its source (all five disguises at once), as measured here."""
    plain = all_scores(AUTHORS)
    copied = all_scores({**AUTHORS, **{f"~{w}": {n: all_five(t, n) for n, t in files.items()}
                                      for w, files in AUTHORS.items()}})
    highest = max(plain.values())
    lowest = min(s for (a, b, _), s in copied.items() if b == f"~{a}")
    files = sum(len(f) for f in AUTHORS.values())
    stated = (f"the {len(AUTHORS)} independent authors' {files} files score at most "
              f"{highest:.2f} against each other; their disguised copies at least {lowest:.2f}")
    assert stated in " ".join(GUIDE.read_text().split())


def test_a_copy_of_an_outside_solution_comes_first_however_many_files_are_shared(tmp_path):
    """23 students hand in one softmax (a file shared, or copied: one line, not 253 pairs), a
    24th a disguised copy of it, and one copies an outside attention word for word: with the
    kit's 200-pair cap, that pair was the 277th, with no page and no row in index.html."""
    corpus = tmp_path / "corpus"
    write(corpus, "2023", {"attention": (KEY / "attention.py").read_text()})
    folders = {f"s{n:02d}": write(tmp_path / "class", f"s{n:02d}", {
        "softmax": (KEY / "softmax.py").read_text()}) for n in range(23)}
    folders["s99"] = write(tmp_path / "class", "s99", {
        "softmax": all_five((KEY / "softmax.py").read_text(), "softmax")})
    folders["zed"] = write(tmp_path / "class", "zed", {
        "attention": (KEY / "attention.py").read_text()})
    found = similarity.compare(folders, COURSE, corpus=corpus)
    class_report.build([], COURSE, tmp_path / "report", similar=found)
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())["similarity"]
    first = summary["pairs"][0]
    assert first["students"] == ["zed", "corpus/2023"] and first["exercise"] == "attention"
    assert (tmp_path / "report" / first["page"]).is_file()
    index = (tmp_path / "report" / "index.html").read_text()
    markdown = (tmp_path / "report" / "summary.md").read_text()
    assert f'href="{first["page"]}"' in index and first["page"] in markdown
    second = summary["pairs"][1]  # the 23 who hold one file, and the disguised copy of it
    assert second["students"] == ["s00", "s99"] and len(second["groups"][0]) == 23
    assert len(summary["pairs"]) == 2  # the 253 pairs of one file are one line:
    line = "23 students: softmax.py identical"
    assert index.count(line) == 1 and markdown.count(line) == 1
    assert "s00 (+22 with the same file) and s99" in index


def test_every_flagged_pair_has_its_page_and_its_row(independent, tmp_path):
    copies = {f"copy-of-{who}": write(tmp_path, f"copy-of-{who}", {
        name: all_five(text, name) for name, text in files.items()})
        for who, files in AUTHORS.items()}
    found = similarity.compare({**independent, **copies}, COURSE)
    class_report.build([], COURSE, tmp_path / "report", similar=found)
    index = (tmp_path / "report" / "index.html").read_text()
    assert len(found.pairs) > 60
    for pair in found.pairs:
        assert index.count(f'href="{pair["page"]}"') == 1
        assert (tmp_path / "report" / pair["page"]).is_file()


def marks(page: str, column: int) -> tuple[str, list[tuple[int, int]]]:
    """A side-by-side page's file (``column`` 0 or 1) as text, and where it is marked."""
    pre = re.findall(r"<pre>(.*?)</pre>", page, re.S)[column]
    text, marked = "", []
    for n, part in enumerate(re.split(r"</?mark>", pre)):
        part = html.unescape(part)
        if n % 2:
            marked.append((len(text), len(text) + len(part)))
        text += part
    return text, marked


def test_the_side_by_side_page_marks_shared_code_and_never_the_stubs_text(tmp_path):
    """The kit marked the stub's docstrings on the page, which its score left out."""
    source = (KEY / "attention.py").read_text()
    folders = {"alice": write(tmp_path, "alice", {"attention": source}),
               "bob": write(tmp_path, "bob", {"attention": all_five(source, "attention")})}
    [page] = similarity.compare(folders, COURSE).pages.values()
    text, marked = marks(page, 0)
    assert text == source
    lines = source.splitlines(keepends=True)
    offsets = [sum(map(len, lines[:n])) for n in range(len(lines) + 1)]
    given = []  # the docstrings, the imports, the two signatures, the comments
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Expr, ast.Import, ast.ImportFrom)) and not isinstance(
                getattr(node, "value", None), ast.Call):
            given.append((offsets[node.lineno - 1], offsets[node.end_lineno]))
        elif isinstance(node, ast.FunctionDef):
            given.append((offsets[node.lineno - 1], offsets[node.lineno]))
    given += [(m.start(), m.end()) for m in re.finditer(r"#.*", source)]
    assert len(given) > 8
    assert not [text[a:b] for a, b in marked for c, d in given if a < d and c < b]
    assert "scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)" in [text[a:b] for a, b in marked]


# -- what is not compared -------------------------------------------------------------------------
def test_a_file_holding_nothing_beyond_the_stub_is_not_compared(tmp_path):
    stub = (STUBS / "softmax.py").read_text()
    students = {name: write(tmp_path, name, {"softmax": stub + extra}) for name, extra in
                [("untouched", ""), ("also-untouched", ""), ("newline", "\n"),
                 ("one-comment", "# started\n")]}
    found = similarity.compare(students, COURSE)
    assert found.pairs == [] and found.identical == []
    assert found.exercises["softmax"]["no_code"] == 4 and found.exercises["softmax"]["files"] == 0


def test_a_file_that_does_not_parse_is_compared_by_its_lines(tmp_path):
    source = (KEY / "attention.py").read_text()
    broken = source + "\ndef unfinished(:\n"
    given = contract((STUBS / "attention.py").read_text())
    assert fingerprint(broken, given).tokens > 0.9 * fingerprint(source, given).tokens
    folders = {"alice": write(tmp_path, "alice", {"attention": source}),
               "bob": write(tmp_path, "bob", {"attention": broken})}
    assert pairs(similarity.compare(folders, COURSE)) == {("alice", "bob", "attention")}


def test_the_cut_is_the_floor_until_the_class_writes_alike():
    """The course's floor, raised where the class's files are alike: to their median plus three
    median deviations (0.05 at least), 1 at most, and above the median."""
    assert similarity.cut(np.array([0.9, 0.95]), 0.7).cut == 0.7  # two pairs: no distribution
    assert similarity.cut(np.array([0.0, 0.1, 0.2, 0.1]), 0.7).cut == 0.7
    raised = similarity.cut(np.array([0.6, 0.7, 0.65, 0.75, 0.6]), 0.7)
    assert raised.median == 0.65 and raised.mad == 0.05 and raised.cut == 0.8
    assert similarity.cut(np.array([0.9, 0.95, 0.9, 0.85]), 0.7).cut == 1.0  # 1 at most
    assert similarity.cut(np.array([0.9, 0.95, 0.9, 0.85]), 0.7).flags(1.0)
    everyone = similarity.cut(np.ones(10), 0.7)  # every file alike: none stands out
    assert everyone.cut == 1.0 and not everyone.flags(1.0)
    assert similarity.cut(np.array([1.0]), 0.7).flags(0.7)  # one pair: the floor alone


# -- outside solutions, the report, determinism ---------------------------------------------
def test_outside_solutions_are_compared_with_every_student(independent, tmp_path):
    corpus = tmp_path / "corpus"
    write(corpus, "staff-2024", {"softmax": (KEY / "softmax.py").read_text()})
    write(corpus, "staff-2023", {"softmax": (KEY / "softmax.py").read_text()})
    students = {"alice": write(tmp_path / "class", "alice",
                               {"softmax": all_five((KEY / "softmax.py").read_text(),
                                                    "softmax")}),
                "bob": independent["softmax_loops_float64"]}
    found = similarity.compare(students, COURSE, corpus=corpus)
    assert [p["students"] for p in found.pairs] == [["alice", "corpus/staff-2023"]]
    assert found.pairs[0]["groups"] == [["alice"], ["corpus/staff-2023", "corpus/staff-2024"]]


def test_report_lists_pairs_links_pages_escapes_student_text_and_is_deterministic(tmp_path):
    source = (KEY / "softmax.py").read_text().replace(
        "    values = np.asarray(logits)", f'    values = np.asarray(logits)  # "{HOSTILE}"')
    folders = {"alice": write(tmp_path / "class", "alice", {"softmax": source}),
               HOSTILE: write(tmp_path / "class", HOSTILE, {"softmax": all_five(source,
                                                                                "softmax")}),
               "link": write(tmp_path / "class", "link", {})}
    (folders["link"] / "softmax.py").symlink_to(folders["alice"] / "softmax.py")  # not read
    (folders["link"] / "attention.py").mkdir()  # not a file: left out, nothing else lost
    outputs = []
    for attempt in ("one", "two"):
        found = similarity.compare(folders, COURSE)
        class_report.build([], COURSE, tmp_path / attempt, similar=found)
        outputs.append({p.relative_to(tmp_path / attempt): p.read_bytes()
                        for p in sorted((tmp_path / attempt).rglob("*")) if p.is_file()})
    assert outputs[0] == outputs[1]
    summary = json.loads(outputs[0][Path("summary.json")])["similarity"]
    [pair] = summary["pairs"]
    assert {k: pair[k] for k in ("students", "exercise", "page")} == {
        "students": [HOSTILE, "alice"], "exercise": "softmax", "page": "similar/1.html"}
    assert summary["threshold"] == COURSE.similarity and pair["score"] >= summary["threshold"]
    assert summary["exercises"]["softmax"]["files"] == 2
    page = outputs[0][Path("similar/1.html")].decode()
    index = outputs[0][Path("index.html")].decode()
    markdown = outputs[0][Path("summary.md")].decode()
    assert HOSTILE not in page and HOSTILE not in index
    assert page.count("&lt;script&gt;") >= 2 and "<mark>" in page  # name and file text
    assert 'href="similar/1.html"' in index and "## Similar submissions" in markdown
    assert "similar/1.html" in markdown


def test_the_result_is_the_same_in_every_process(independent):
    """No salted hash anywhere: two interpreters with different hash seeds agree. (The
    course, as ``compare`` reads it, without the exercises' modules: no torch to import.)"""
    script = ("import json, sys, types; from pathlib import Path; "
              "from grader.integrations.outputs import similarity; "
              "course = types.SimpleNamespace(similarity=float(sys.argv[3]), "
              "names=lambda: sys.argv[4:]); "
              "folders = {p.name: p for p in sorted(Path(sys.argv[1]).iterdir())}; "
              "found = similarity.compare(folders, course, corpus=Path(sys.argv[2])); "
              "print(json.dumps(found.summary, sort_keys=True))")
    root = next(iter(independent.values())).parent
    corpus = root.parent / "corpus-of-copies"
    for who in ("key", "eve", "cy"):
        write(corpus, who, {name: all_five(text, name) for name, text in AUTHORS[who].items()})
    runs = [subprocess.run([sys.executable, "-c", script, str(root), str(corpus),
                            str(COURSE.similarity), *COURSE.names()], cwd=KIT, check=True,
                           capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout
            for seed in ("1", "2")]
    found = json.loads(runs[0])
    assert runs[0] == runs[1] and found == json.loads(json.dumps(
        similarity.compare(independent, COURSE, corpus=corpus).summary))
    assert found["exercises"]["mha"]["files"] > 8
    assert len(found["pairs"]) == sum(len(AUTHORS[who]) for who in ("key", "eve", "cy"))


def test_report_command_compares_the_submissions_and_the_corpus(tmp_path, capsys):
    write(tmp_path / "class", "alice", {"softmax": (KEY / "softmax.py").read_text()})
    write(tmp_path / "corpus", "staff", {"softmax": (KEY / "softmax.py").read_text()})
    (tmp_path / "json").mkdir()
    command = ["report", str(tmp_path / "json"), "--out", str(tmp_path / "out"),
               "--submissions", str(tmp_path / "class"),
               "--similarity-corpus", str(tmp_path / "corpus")]
    assert main(command) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [p["students"] for p in summary["similarity"]["pairs"]] == [["alice",
                                                                          "corpus/staff"]]
    shutil.rmtree(tmp_path / "corpus")
    assert main(command) == 2
    assert "corpus is not a folder" in capsys.readouterr().err


def test_the_report_data_flows_one_way_from_summary_to_page():
    """class_report makes the summary and hands it to class_page: the page imports nothing
    of the report (no import cycle)."""
    tree = ast.parse(Path(class_page.__file__).read_text())
    imported = {node.module for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module}
    assert "class_report" not in imported
