"""The student handout: no solution code in it, and grading works from a fresh copy."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from submission_tools import BONUS, CORE, EXERCISES, SOLUTIONS, checks_for

from grader.integrations.routes import handout

WORD = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|\"[^\"]*\"|'[^']*'")  # names, numbers, strings
REGION = re.compile(r"^[ \t]*### BEGIN SOLUTION[ \t]*\n(.*?)^[ \t]*### END SOLUTION", re.M | re.S)


def normalize(text: str) -> str:
    """Each line stripped, blank lines dropped: indentation and spacing cannot hide a copy."""
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def solution_bodies() -> list[tuple[str, str]]:
    bodies = []
    for path in sorted(SOLUTIONS.glob("*.py")):
        for index, body in enumerate(REGION.findall(path.read_text())):
            bodies.append((f"{path.name}#{index}", normalize(body)))
    return bodies


def solution_lines() -> dict[str, str]:
    """Every line of every solution region, stripped, that says something: three or more
    names, numbers or strings (``else:`` and ``)`` say nothing), mapped to its file."""
    lines = {}
    for path in sorted(SOLUTIONS.glob("*.py")):
        for body in REGION.findall(path.read_text()):
            for line in body.splitlines():
                if len(WORD.findall(line)) >= 3 and not line.strip().startswith("#"):
                    lines.setdefault(line.strip(), path.name)
    return lines


def line_leaks(folder: Path) -> list[str]:
    lines = solution_lines()
    found = []
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            for text in path.read_text(errors="replace").splitlines():
                if text.strip() in lines:
                    found.append(f"{lines[text.strip()]}: {text.strip()!r} in {path}")
    return found


def leaks(folder: Path) -> list[str]:
    texts = {str(p): normalize(p.read_text(errors="replace"))
             for p in sorted(folder.rglob("*")) if p.is_file()}
    return [f"{name} in {where}" for name, body in solution_bodies()
            for where, text in texts.items() if body in text]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return handout.build(tmp_path_factory.mktemp("dist") / "handout")


def test_every_solution_region_is_found():
    assert len(solution_bodies()) >= 6
    assert all(body for _, body in solution_bodies())


def test_handout_holds_no_solution_body(built):
    assert leaks(built) == []
    assert not (built / "solutions").exists()
    shipped = "\n".join(p.read_text() for p in (built / "grader" / "problems").rglob("*.py"))
    assert "hidden=True" not in shipped and "ctx.key" not in shipped
    hidden = [c.name for e in EXERCISES.values() for c in e.checks if c.hidden]
    assert hidden and not any(name in shipped for name in hidden)
    assert sorted(p.name for p in (built / "exercises").iterdir()) == sorted(
        p.name for p in SOLUTIONS.glob("*.py"))


def test_no_line_of_a_solution_appears_in_the_handout(built):
    assert len(solution_lines()) > 100
    assert line_leaks(built) == []


def test_the_course_secret_stays_out_of_the_handout(built):
    from grader.core.course import SECRET_FILE

    secret = (SOLUTIONS / SECRET_FILE)
    assert not list(built.rglob(SECRET_FILE))
    if secret.is_file():
        text = secret.read_text().strip()
        assert text and not any(text in p.read_text(errors="replace")
                                for p in built.rglob("*") if p.is_file())


def test_leak_search_finds_a_planted_body(built, tmp_path):
    copy = shutil.copytree(built, tmp_path / "copy")
    name, body = solution_bodies()[0]
    (copy / "grader" / "helpers.py").write_text("def f():\n        " + body.replace("\n", "\n    "))
    assert leaks(copy) == [f"{name} in {copy / 'grader' / 'helpers.py'}"]
    line = next(iter(solution_lines()))
    (copy / "grader" / "helpers.py").write_text(f"# nothing\n    {line}\n")
    assert len(line_leaks(copy)) == 1


def test_handout_grades_from_a_fresh_copy(built, tmp_path):
    copy = shutil.copytree(built, tmp_path / "copy")
    for path in SOLUTIONS.glob("*.py"):  # a student who got everything right
        shutil.copyfile(path, copy / "exercises" / path.name)
    run = subprocess.run([sys.executable, "-m", "grader", "grade", "exercises"], cwd=copy,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    hidden = sum(c.points for name in handout_exercises() for c in checks_for(name) if c.hidden)
    assert hidden > 0
    assert re.search(rf"^total +{100 - hidden} / {100 - hidden}$", run.stdout, re.M), run.stdout
    assert f"{hidden} more points come from hidden checks" in run.stdout
    # the bonus total too (on 4e1a685: "bonus total  54 / 54", and nothing said the other 6)
    bonus = sum(c.points for name in BONUS for c in checks_for(name) if c.hidden)
    assert re.search(rf"^bonus total +{60 - bonus} / {60 - bonus}\n\n\({bonus} more bonus "
                     r"points come from hidden checks your instructor runs\.\)$", run.stdout, re.M)


def handout_exercises() -> tuple[str, ...]:
    return CORE
