"""Similar submissions in the class report: disguised copies flagged with their source, the kit's
independent correct solutions (the answer key and the zoo's correct entries, written in other
styles) left alone, outside solutions compared too, every student's text escaped.

Small synthetic classes, compared by ``similarity.compare`` directly: no grading needed.
"""

from __future__ import annotations

import ast
import builtins
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from submission_tools import COURSE, KIT
from zoo.catalog import CORRECT, KEY

from grader.integrations import class_page, class_report, similarity
from grader.integrations.cli import main

HOSTILE = "<script>alert(1)</script>"


def disguise(text: str) -> str:
    """A copy as a student would hide it: every name of the file's own renamed, its top-level
    functions and classes in reverse order, other comments, other whitespace."""
    tree = ast.parse(text)
    keep = set(dir(builtins)) | {"self", "cls"}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            keep.update((a.asname or a.name).split(".")[0] for a in node.names)
    renamed: dict[str, str] = {}

    def rename(name: str) -> str:
        return name if name in keep else renamed.setdefault(name, f"v{len(renamed)}_{name[::-1]}")

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            node.name = rename(node.name)
        elif isinstance(node, ast.arg):
            node.arg = rename(node.arg)
        elif isinstance(node, ast.Name):
            node.id = rename(node.id)
    head = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom, ast.Expr))]
    tree.body = head + [n for n in tree.body if n not in head][::-1]
    lines = []
    for line in ast.unparse(tree).splitlines():
        code = line.lstrip()
        indent = " " * ((len(line) - len(code)) // 2)  # two spaces a level, not four
        if code.startswith(("def ", "class ", "for ", "if ")):
            lines += ["", f"{indent}# my own words here"]
        lines.append(indent + code + ("  # done" if code.startswith("return") else ""))
    return "\n".join(lines) + "\n"


def write(root: Path, student: str, files: dict[str, str]) -> Path:
    folder = root / student
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / f"{name}.py").write_text(text)
    return folder


@pytest.fixture(scope="module")
def independent(tmp_path_factory) -> dict[str, Path]:
    """The answer key and each correct zoo entry as a student of its own: solutions written
    independently, in different styles."""
    root = tmp_path_factory.mktemp("independent")
    folders = {"key": write(root, "key", {n: (KEY / f"{n}.py").read_text()
                                          for n in COURSE.names()})}
    for entry in CORRECT:
        folders[entry.name] = write(root, entry.name, {entry.exercise: entry.source()})
    return folders


def pairs(found: similarity.Similarity) -> set[tuple[str, str, str]]:
    return {(*p["students"], p["exercise"]) for p in found.pairs}


def test_scores_are_copydetects_own(independent):
    """The vectorised shares equal copydetect's compare_files on the same fingerprints."""
    from copydetect import compare_files

    stub = np.array(sorted(similarity.fingerprint(
        (KIT / "exercises" / "softmax.py").read_text()).hashes))
    texts = [(folder / "softmax.py").read_text() for folder in independent.values()
             if (folder / "softmax.py").is_file()]
    prints = [similarity.fingerprint(text, stub) for text in [*texts, disguise(texts[0])]]
    compared = 0
    for a in prints:
        for b in prints:
            if a is not b:
                expected = compare_files(a, b)[1]
                assert similarity.shares(a, b) == pytest.approx(expected, abs=1e-12)
                compared += expected[0] > 0
    assert compared > len(prints)  # most pairs share something


def test_independent_correct_solutions_are_not_flagged(independent):
    found = similarity.compare(independent, COURSE)
    assert found.threshold == COURSE.similarity
    assert found.pairs == [] and found.pages == {}


def test_disguised_copies_are_flagged_with_their_source_and_nothing_else(independent,
                                                                          tmp_path):
    copies = {}
    for source, folder in independent.items():
        files = {p.stem: disguise(p.read_text()) for p in sorted(folder.glob("*.py"))}
        copies[f"copy-of-{source}"] = write(tmp_path, f"copy-of-{source}", files)
    found = similarity.compare({**independent, **copies}, COURSE)
    expected = {(min(a, b), max(a, b), name) for a, b in
                ((s, f"copy-of-{s}") for s in independent)
                for name in [p.stem for p in sorted(independent[a].glob("*.py"))]}
    assert pairs(found) == expected
    scores = [p["score"] for p in found.pairs]
    assert scores == sorted(scores, reverse=True) and min(scores) >= COURSE.similarity
    assert sorted(found.pages) == sorted(p["page"] for p in found.pairs)


def test_outside_solutions_are_compared_with_every_student(independent, tmp_path):
    corpus = tmp_path / "corpus"
    write(corpus, "staff-2024", {"softmax": (KEY / "softmax.py").read_text()})
    write(corpus, "staff-2023", {"softmax": (KEY / "softmax.py").read_text()})
    students = {"alice": write(tmp_path / "class", "alice",
                               {"softmax": disguise((KEY / "softmax.py").read_text())}),
                "bob": independent["softmax_loops_float64"]}
    found = similarity.compare(students, COURSE, corpus=corpus)
    assert pairs(found) == {("alice", "corpus/staff-2023", "softmax"),
                            ("alice", "corpus/staff-2024", "softmax")}


def test_the_stub_text_shared_by_everyone_is_left_out(tmp_path):
    stub = (KIT / "exercises" / "softmax.py").read_text()
    students = {name: write(tmp_path, name, {"softmax": stub + extra}) for name, extra in
                [("untouched", ""), ("also-untouched", "\n"), ("one-line", "# started\n")]}
    assert similarity.compare(students, COURSE).pairs == []


def test_report_lists_pairs_links_pages_escapes_student_text_and_is_deterministic(tmp_path):
    source = (KEY / "softmax.py").read_text().replace('"""', f'"""{HOSTILE}', 1)
    folders = {"alice": write(tmp_path / "class", "alice", {"softmax": source}),
               HOSTILE: write(tmp_path / "class", HOSTILE, {"softmax": disguise(source)}),
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
    summary = json.loads(outputs[0][Path("summary.json")])
    assert summary["similarity"] == {"threshold": COURSE.similarity, "pairs": [
        {"students": [HOSTILE, "alice"], "exercise": "softmax",
         "score": summary["similarity"]["pairs"][0]["score"], "page": "similar/1.html"}]}
    page = outputs[0][Path("similar/1.html")].decode()
    index = outputs[0][Path("index.html")].decode()
    markdown = outputs[0][Path("summary.md")].decode()
    assert HOSTILE not in page and HOSTILE not in index
    assert page.count("&lt;script&gt;") >= 2 and "<mark>" in page  # name and file text
    assert 'href="similar/1.html"' in index and "## Similar submissions" in markdown
    assert "similar/1.html" in markdown


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
