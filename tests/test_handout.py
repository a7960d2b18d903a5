"""The student handout: no solution code in it, and grading works from a fresh copy."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from submission_tools import BONUS, CORE, COURSE, EXERCISES, SOLUTIONS, checks_for

from grader.integrations.routes import handout, handout_check

REGION = handout_check.REGION


def normalize(text: str) -> str:
    """Each line stripped, blank lines dropped: indentation and spacing cannot hide a copy."""
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def solution_bodies() -> list[tuple[str, str]]:
    bodies = []
    for path in sorted(SOLUTIONS.glob("*.py")):
        for index, body in enumerate(REGION.findall(path.read_text())):
            bodies.append((f"{path.name}#{index}", normalize(body)))
    return bodies


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
    assert len(handout_check.key_lines()) > 100
    assert [str(s) for s in handout_check.shared_lines(built)] == []


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
    line, where = next(iter(handout_check.key_lines().items()))
    (copy / "grader" / "helpers.py").write_text(f"# nothing\n    {line}\n")
    shared = handout_check.shared_lines(copy)
    assert [(s.where, s.key, s.text) for s in shared] == [("grader/helpers.py:2", where, line)]


def test_the_check_points_at_the_kits_own_line(tmp_path, monkeypatch):
    """A line of an exercise module that repeats the key is named by the module's own file and
    line in the kit, below a hidden-checks region that the handout cuts out."""
    kit = tmp_path / "kit"
    shutil.copytree(SOLUTIONS.parent / "grader", kit / "grader",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "requirements.lock"):
        shutil.copyfile(SOLUTIONS.parent / name, kit / name)
    line, where = next((text, where) for text, where in handout_check.key_lines().items()
                       if where.startswith("solutions/kv_cache.py"))
    module = kit / "grader" / "problems" / "kv_cache.py"
    text = module.read_text() + f"\n\ndef copied():\n    {line}\n"
    module.write_text(text)
    monkeypatch.setattr(handout_check, "ROOT", kit)
    monkeypatch.setattr(handout, "ROOT", kit)
    shared = handout_check.shared_lines(handout.build(tmp_path / "handout"))
    number = text.splitlines().index(f"    {line}") + 1
    assert [(s.source, s.key) for s in shared] == [
        (f"grader/problems/kv_cache.py:{number}", where)]
    assert shared[0].where != shared[0].source  # the hidden checks above it are cut out
    assert str(shared[0]).startswith(f"grader/problems/kv_cache.py:{number}: ")


def test_the_kits_lines_are_mapped_as_the_handout_cuts_them():
    """Each line a stub or a module ships is the line of the kit's file the check names."""
    from grader.integrations.routes.stubs import strip_solution

    for path in sorted(SOLUTIONS.glob("*.py")):
        key = path.read_text().splitlines()
        stub = strip_solution(path.read_text(), path.stem).splitlines()
        numbers = handout_check._stub_lines(path.read_text())
        assert len(numbers) == len(stub)
        assert all(line == key[n - 1] or ("BEGIN SOLUTION" in key[n - 1]
                                         and "NotImplementedError" in line)
                   for line, n in zip(stub, numbers))
    for path in sorted((SOLUTIONS.parent / "grader" / "problems").rglob("*.py")):
        source = path.read_text().splitlines()
        shipped = handout.without_hidden_checks(path.read_text()).splitlines()
        assert [source[n - 1] for n in handout_check._without_hidden(path.read_text())] == \
            shipped


def test_handout_grades_from_a_fresh_copy(built, tmp_path):
    copy = shutil.copytree(built, tmp_path / "copy")
    for path in SOLUTIONS.glob("*.py"):  # a student who got everything right
        shutil.copyfile(path, copy / "exercises" / path.name)
    run = subprocess.run([sys.executable, "-m", "grader", "grade", "exercises"], cwd=copy,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    hidden = sum(c.points for name in handout_exercises() for c in checks_for(name) if c.hidden)
    assert hidden > 0
    public = COURSE.total() - hidden
    assert re.search(rf"^total +{public:g} / {public:g}$", run.stdout, re.M), run.stdout
    assert f"{hidden} more points come from hidden checks" in run.stdout
    # the bonus total too (on 4e1a685: "bonus total  54 / 54", and nothing said the other 6)
    bonus = sum(c.points for name in BONUS for c in checks_for(name) if c.hidden)
    public = COURSE.total("bonus") - bonus
    assert re.search(rf"^bonus total +{public:g} / {public:g}\n\n\({bonus} more bonus "
                     r"points come from hidden checks your instructor runs\.\)$", run.stdout, re.M)


def handout_exercises() -> tuple[str, ...]:
    return CORE
