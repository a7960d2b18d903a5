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


# -- writing it again destroys no one's files (make handout removed the folder whole) ------------
def test_a_rebuild_keeps_the_instructors_files_and_removes_only_the_kits_own(tmp_path):
    from grader.core.course import load

    target = handout.build(tmp_path / "handout")
    (target / "syllabus.md").write_text("week 1: softmax\n")  # the instructor's own
    (target / "data").mkdir()
    (target / "data" / "tokens.txt").write_text("a b c\n")
    (target / "grader" / "notes.txt").write_text("mine\n")  # beside the kit's files
    fewer = tmp_path / "course.toml"
    fewer.write_text("[exercises.flash]\nenabled = false\n")
    assert handout.build(target, load(fewer)) == target
    assert (target / "syllabus.md").read_text() == "week 1: softmax\n"
    assert (target / "data" / "tokens.txt").read_text() == "a b c\n"
    assert (target / "grader" / "notes.txt").read_text() == "mine\n"
    assert not (target / "exercises" / "flash.py").exists()  # the kit's, no longer written
    assert sorted(p.name for p in (target / "exercises").iterdir()) == sorted(
        f"{name}.py" for name in load(fewer).names())
    assert (target / "course.toml").read_text() == fewer.read_text()


def test_a_file_the_kit_would_replace_is_refused_by_name_until_forced(tmp_path):
    target = handout.build(tmp_path / "handout")
    readme = (target / "README.md").read_text()
    (target / "README.md").write_text(readme + "Office hours: Tuesdays.\n")
    (target / "exercises" / "softmax.py").unlink()  # missing: the kit's to write again
    with pytest.raises(handout.ChangedFiles) as refused:
        handout.build(target)
    assert refused.value.lost == {"README.md": "changed since the kit wrote it"}
    assert "README.md (changed since the kit wrote it)" in str(refused.value)
    assert "make handout FORCE=1" in str(refused.value) and "--force" in str(refused.value)
    assert (target / "README.md").read_text().endswith("Tuesdays.\n")  # nothing written
    assert not (target / "exercises" / "softmax.py").exists()
    handout.build(target, force=True)
    assert (target / "README.md").read_text() == readme
    assert (target / "exercises" / "softmax.py").is_file()


def test_a_folder_the_kit_never_wrote_keeps_what_it_holds(tmp_path):
    """Pointed at a folder of someone's (or a handout written without its record), the kit
    takes over only the files that already hold what it writes."""
    target = handout.build(tmp_path / "handout")
    (target / handout.RECORD).unlink()
    assert handout.build(target) == target  # the same files: nothing is lost
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "Makefile").write_text("all:\n\techo mine\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.py").write_text("kept\n")
    (elsewhere / "grader").symlink_to(outside)  # writing through it would write outside
    with pytest.raises(handout.ChangedFiles) as refused:
        handout.build(elsewhere)
    assert refused.value.lost == {"Makefile": "not written by the kit", "grader": "a link"}
    assert sorted(p.name for p in elsewhere.iterdir()) == ["Makefile", "grader"]
    handout.build(elsewhere, force=True)
    assert (elsewhere / "grader").is_dir() and not (elsewhere / "grader").is_symlink()
    assert [p.name for p in outside.iterdir()] == ["keep.py"]  # the link's target untouched


def test_the_command_refuses_with_the_names_and_exit_1(tmp_path, capsys):
    from grader.integrations.routes import cli

    target = tmp_path / "handout"
    assert cli.main(["handout", str(target)]) == 0
    (target / "Makefile").write_text("grade:\n")
    assert cli.main(["handout", str(target)]) == 1
    error = capsys.readouterr().err
    assert error.startswith("error: not writing ") and "Makefile (changed since" in error
    assert (target / "Makefile").read_text() == "grade:\n"
    assert cli.main(["handout", str(target), "--force"]) == 0
    assert (target / "Makefile").read_text() == handout.MAKEFILE


def handout_exercises() -> tuple[str, ...]:
    return CORE
