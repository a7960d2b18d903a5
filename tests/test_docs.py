"""The docs hold together (issue 39): the README stays short and sends each reader to their
page; the pages build as a site with no broken link or anchor (mkdocs, strict); and every file
of the kit and every make target they name exists, so moving a file cannot leave them behind."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parent.parent
README = KIT / "README.md"
PAGES = ("students.md", "instructors.md", "contributing.md", "how-grading-works.md")
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
