"""The docs hold together (issue 39): the README stays short and sends each reader to their
page; the pages build as a site with no broken link or anchor (mkdocs, strict); and every file
of the kit and every make target they name exists, so moving a file cannot leave them behind.

And they read as guides (issue 45): no paragraph over 150 words outside code blocks and tables,
no commit hash outside the changelog, and "What the kit cannot promise" one limit a row, each
with what an instructor should do about it. The commands they show are run in
``test_doc_commands.py``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parent.parent
README = KIT / "README.md"
PAGES = ("students.md", "instructors.md", "contributing.md", "how-grading-works.md",
         "changelog.md")
DOCS = [README, *sorted((KIT / "docs").glob("*.md"))]
# A path of the kit's, as the docs write one: in backticks, from one of its top folders.
PATH = re.compile(r"`((?:grader|tests|solutions|exercises|docs|k8s|\.ci)/[^`\s]*)`")
MAKE = re.compile(r"`make ([a-z][\w-]*)")


def test_the_readme_is_short_and_names_every_readers_page():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    for page in PAGES:
        assert f"](docs/{page})" in text, page
        assert (KIT / "docs" / page).is_file()


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_and_make_target_the_docs_name_exists(doc):
    text = doc.read_text()
    # a file the kit makes on first use (the course secret) is in .gitignore, not in a clone
    made = set((KIT / ".gitignore").read_text().split())
    missing = [p for p in PATH.findall(text) if "<" not in p and "*" not in p and p not in made
               and not (KIT / p.split("::")[0].rstrip("/.,")).exists()]
    assert missing == []
    targets = set(re.findall(r"^([\w-]+):", (KIT / "Makefile").read_text(), re.M))
    assert sorted(set(MAKE.findall(text)) - targets) == []


def test_the_site_builds_strictly(tmp_path):
    """A broken link or anchor between the pages fails the build (mkdocs.yml's validation)."""
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=KIT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert all((tmp_path / "site" / page.replace(".md", ".html")).is_file() for page in PAGES)


def test_a_broken_anchor_fails_the_build(tmp_path):
    """The strict build is a check that can fail: the same pages with one link to an anchor
    that is not there."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for page in (KIT / "docs").glob("*.md"):
        (docs / page.name).write_text(page.read_text())
    with (docs / "index.md").open("a") as index:
        index.write("\n[gone](students.md#no-such-section)\n")
    config = (KIT / "mkdocs.yml").read_text().replace("docs_dir: docs", f"docs_dir: {docs}")
    (tmp_path / "mkdocs.yml").write_text(config)
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f",
                           str(tmp_path / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "no-such-section" in done.stderr


# -- guides, not a history (issue 45) --------------------------------------------------------------
MAX_WORDS = 150
# A commit: 7 to 40 hex digits, letters and digits both (a number such as 0.1491768 is not one).
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
ITEM = re.compile(r"\s*(?:[-*]|\d+\.)\s")
MARKER = re.compile(r"<!--.*?-->")


def paragraphs(text: str) -> list[str]:
    """The page's paragraphs as a reader meets them: runs of lines between blank lines,
    headings, code blocks and tables, each list item one of its own; the course's markers
    (``<!-- course: ... -->``) are not words."""
    found: list[list[str]] = []
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```") or fenced or not stripped or stripped[0] in "|#":
            fenced ^= stripped.startswith("```")
            found.append(lines)
            lines = []
        elif ITEM.match(line):
            found.append(lines)
            lines = [ITEM.sub("", line, count=1)]  # the item's words, not its marker
        else:
            lines.append(stripped)
    found.append(lines)
    return [MARKER.sub("", " ".join(p)) for p in found if p]


def test_paragraphs_are_counted_as_a_reader_sees_them():
    """The counter the next test relies on can fail: a long paragraph is one, a list item and
    a code block end one, and a table row is none."""
    long = " ".join(["word"] * 151)
    page = f"# T\n\n{long}\n\n- one\n- two words\n  more\n\n```sh\n{long}\n```\n| {long} |\n"
    assert [len(p.split()) for p in paragraphs(page)] == [151, 1, 3]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_paragraph_is_over_150_words(doc):
    long = [f"{len(p.split())} words: {p[:60]}..." for p in paragraphs(doc.read_text())
            if len(p.split()) > MAX_WORDS]
    assert long == []


@pytest.mark.parametrize("doc", [d for d in DOCS if d.name != "changelog.md"],
                         ids=lambda p: p.name)
def test_no_commit_is_named_outside_the_changelog(doc):
    """What a past version did is the changelog's; a guide says what the kit does now."""
    assert COMMIT.findall(doc.read_text()) == []


def test_the_changelog_names_the_versions_it_measured():
    assert COMMIT.search((KIT / "docs" / "changelog.md").read_text())
    assert "changelog.md" in (KIT / "mkdocs.yml").read_text()


def test_what_the_kit_cannot_promise_is_one_limit_a_row_with_what_to_do():
    text = (KIT / "docs" / "instructors.md").read_text()
    section = text.split("\n## What the kit cannot promise\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows[0] == "| what can get through | what to do |"
    limits = [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows[1:]]
    assert len(limits) >= 15
    assert all(len(row) == 2 and all(len(cell.split()) >= 3 for cell in row) for row in limits)
    prose = [p for p in paragraphs(section) if p]
    assert len(prose) <= 1  # one sentence before the table, no paragraph of limits


def test_the_readme_starts_with_setting_up_and_grading():
    """The order a newcomer needs: set up and grade first, with the one command it takes."""
    headings = re.findall(r"^## (.+)$", README.read_text(), re.M)
    assert headings[0] == "Set up and grade"
    first = README.read_text().split("\n## ", 2)[1]
    assert "```sh\nmake grade\n```" in first
