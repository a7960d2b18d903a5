"""Every command the README and docs/ show runs as a reader pastes it (issue 45: ``python -m
grader ...`` failed as written, 18 times, on a system without ``python``).

The commands are each shell line of a ``sh`` block and each inline span that starts with
``make`` or ``.venv/bin/``. They are tried on a fresh clone (the kit's tracked and untracked
files, as ``as_user`` copies them), as an ordinary user (uid 65534 where this process is root,
else this user), in a shell whose ``PATH`` is ``/usr/bin:/bin``. Its ``.venv`` holds what
``make test`` leaves there: the kit, installed by pip from the clone's ``pyproject.toml`` (so
``.venv/bin/grader`` is its console script), and the other packages' commands.

- A block that walks through a workflow runs top to bottom as one shell script (``RUN``).
- A ``grader`` command runs for real where it is quick (``QUICK``) and is parsed by the real
  parser otherwise (it needs a class, a cluster or minutes), each ``[...]`` of a synopsis both
  left out and given.
- A ``make`` command is dry-run (``make -n``: its target, its variables, and a recipe that
  starts from a ``.venv`` already set up); the quick ones run for real (``QUICK_MAKE``:
  ``make grade``, the first command a reader types, among them).
- A ``pytest`` command collects its checks (``--collect-only``), and one file's run is real.

A shell line of another kind fails the test until it is given a way to be checked here.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import as_user
import pytest
from submission_tools import KIT

from grader.integrations.routes import cli

DOCS = [KIT / "README.md", *sorted((KIT / "docs").glob("*.md"))]
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.S | re.M)
INLINE = re.compile(r"(?<!`)`((?:make|\.venv/bin/\w+) [^`]+)`(?!`)")
# The blocks run as scripts, by their first line: each is a workflow a guide walks through.
RUN = ("make nbgrader COURSE=$HOME/attention-course", "make gradescope")
# grader commands quick enough to run for real (a second or a few).
QUICK = re.compile(r"--help$|^grade exercises --exercise softmax$")
QUICK_MAKE = ("make grade", "make stubs")
KINDS = ("make", ".venv/bin/grader", ".venv/bin/pytest")


# -- what the docs show --------------------------------------------------------------------------
@dataclass(frozen=True)
class Shown:
    doc: str  # the page's name
    text: str  # the command, its continuation lines joined, its comment left out

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.text)


def _logical_lines(block: str) -> list[str]:
    """A block's commands as written: continuation lines joined, comments and blank lines
    left out."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [line for line in map(_without_comment, joined.splitlines()) if line]


def _without_comment(line: str) -> str:
    """``line`` up to its comment: a ``#`` at its start or after a blank, outside quotes."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].strip()
    return line.strip()


@functools.cache
def shown() -> tuple[list[tuple[str, str]], list[Shown], list[Shown]]:
    """The docs' ``sh`` blocks (page, text), their commands, and the inline commands."""
    blocks, lines, inline = [], [], []
    for doc in DOCS:
        if doc.name == "changelog.md":  # it quotes what earlier versions said, as they said it
            continue
        text = doc.read_text()
        for fence in FENCE.finditer(text):
            if fence[2] == "sh":
                body = re.sub(rf"^{fence[1]}", "", fence[3], flags=re.M)
                blocks.append((doc.name, body))
                lines += [Shown(doc.name, line) for line in _logical_lines(body)]
        for span in INLINE.finditer(FENCE.sub("", text)):
            inline.append(Shown(doc.name, " ".join(span[1].split())))
    return blocks, lines, inline


def _run_blocks() -> list[tuple[str, str]]:
    blocks, _, _ = shown()
    return [(doc, body) for doc, body in blocks if _logical_lines(body)[0].startswith(RUN)]


def _single_commands() -> list[Shown]:
    """Every command outside the blocks that run as scripts."""
    _, lines, inline = shown()
    scripted = {line for _, body in _run_blocks() for line in _logical_lines(body)}
    return [s for s in lines if s.text not in scripted] + inline


# -- the fresh clone, as a user ------------------------------------------------------------------
@dataclass(frozen=True)
class Clone:
    folder: Path
    home: Path
    env: dict[str, str]
    as_uid: bool  # as uid 65534 (this process is root), else as this process's user
    # The modules of packages installed for this process's Python that the user's (an older
    # release of the same minor version, /usr/bin/python3) cannot run: `make grade` would have
    # installed an older release of each for it (requirements*.lock leaves them unpinned).
    unusable: tuple[str, ...]

    def run(self, command: str | list[str], timeout: int = 300,
            **kwargs: object) -> subprocess.CompletedProcess:
        """``command`` (a shell script, or an argv) in the clone's folder, as the user."""
        argv = ["bash", "-euo", "pipefail", "-c", command] if isinstance(command, str) else [
            *command]
        if self.as_uid:
            argv = ["setpriv", f"--reuid={as_user.UID}", f"--regid={as_user.GID}",
                    "--clear-groups", "--", *argv]
        return subprocess.run(argv, cwd=self.folder, env=self.env, capture_output=True,
                              text=True, timeout=timeout, **kwargs)  # type: ignore[call-overload]


SCRIPT = """\
#!{python}
import sys
from {module} import {head}
sys.exit({attr}())
"""


def _commands_of_other_packages(site: Path, bin_folder: Path) -> None:
    """The console scripts of the packages in ``site`` (pytest, nbgrader, ...), as pip writes
    them, in ``bin_folder``: what ``make test``'s install leaves there besides the kit's."""
    for dist in metadata.distributions(path=[str(site)]):
        if dist.metadata["Name"] == "attention-kit":
            continue
        for entry in dist.entry_points.select(group="console_scripts"):
            path = bin_folder / entry.name
            if entry.attr and not path.exists():
                path.write_text(SCRIPT.format(python=bin_folder / "python", module=entry.module,
                                              head=entry.attr.split(".")[0], attr=entry.attr))
                path.chmod(0o755)


def _unusable(site: Path, python: Path) -> tuple[str, ...]:
    """The top-level modules of the packages in ``site`` whose ``Requires-Python`` the
    interpreter ``python`` does not meet."""
    from packaging.specifiers import SpecifierSet

    version = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    found = set()
    for dist in metadata.distributions(path=[str(site)]):
        needs = dist.metadata["Requires-Python"]
        if needs and version not in SpecifierSet(needs):
            found |= {Path(str(f)).parts[0] for f in dist.files or ()
                      if not str(f).startswith(("..", "__")) and ".dist-info" not in str(f)}
    return tuple(sorted(found))


@pytest.fixture(scope="module")
def clone() -> Iterator[Clone]:
    as_uid = os.geteuid() == 0
    if as_uid and as_user.why_not() is not None:
        pytest.skip(str(as_user.why_not()))
    # Not under pytest's own folder, which another user cannot enter.
    base = Path(tempfile.mkdtemp(prefix="attention-kit-fresh-clone-"))
    try:
        base.chmod(0o755)
        yield _fresh_clone(base, as_uid)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _fresh_clone(base: Path, as_uid: bool) -> Clone:
    folder, home = base / "kit", base / "home"
    folder.mkdir()
    home.mkdir()
    as_user._copy_kit(folder)
    interpreter = as_user._interpreter() if as_uid else sys._base_executable
    venv = folder / ".venv"
    subprocess.run([interpreter, "-m", "venv", "--without-pip", str(venv)], check=True,
                   capture_output=True)
    purelib = subprocess.run([venv / "bin" / "python", "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    site = as_user._site_for_the_user(base) if as_uid else Path(sysconfig.get_paths()["purelib"])
    Path(purelib, "attention-kit-packages.pth").write_text(f"{site}\n")
    _commands_of_other_packages(site, venv / "bin")
    # and their data files (nbconvert's templates, which nbgrader's feedback needs)
    shared = Path(sys.prefix) / "share" / "jupyter"
    if shared.is_dir():
        (venv / "share").mkdir()
        if subprocess.run(["cp", "-al", str(shared), str(venv / "share")],
                          capture_output=True).returncode != 0:
            shutil.copytree(shared, venv / "share" / "jupyter", symlinks=True,
                            dirs_exist_ok=True)
    if as_uid:
        for owned in (folder, home):
            as_user._chown(owned)
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "USER": "newcomer",
           "LOGNAME": "newcomer", "ATTENTION_KIT_SECRET": "", "PYTHONDONTWRITEBYTECODE": "1"}
    kit = Clone(folder, home, env, as_uid, _unusable(site, venv / "bin" / "python"))
    # What `make grade` and `make test` do after creating .venv: the kit by pip, the stamps.
    done = kit.run(".venv/bin/python -m pip install --quiet --no-deps --no-build-isolation "
                   "--no-index --disable-pip-version-check -e . && touch .venv/.installed-core "
                   ".venv/.installed-dev")
    assert done.returncode == 0, done.stdout + done.stderr
    return kit


# -- the checks ----------------------------------------------------------------------------------
def test_the_docs_show_commands_to_check():
    """Every command is of a kind this test checks, and each walkthrough it runs is there."""
    _, lines, inline = shown()
    assert len(lines) >= 20 and len(inline) >= 20
    assert sorted(_logical_lines(body)[0] for _, body in _run_blocks()) == sorted(
        line for line in RUN)
    # contributing.md's guide blocks (.venv/bin/python tests/zoo/catalog.py ..., the tests a new
    # exercise runs) are run as written by tests/test_contributing_guide.py
    unknown = [f"{s.doc}: {s.text}" for s in _single_commands() if s.argv[0] not in KINDS
               and not (s.doc == "contributing.md" and s.argv[0] == ".venv/bin/python")]
    assert unknown == []


def test_no_command_needs_a_python_the_reader_may_not_have():
    """``python`` is no command on a plain Debian, and ``python3`` outside ``.venv`` has no
    NumPy: the kit is run as ``.venv/bin/grader`` (or ``make``)."""
    found = [f"{s.doc}: {s.text}" for s in _single_commands()
             + [Shown(doc, line) for doc, body in _run_blocks() for line in _logical_lines(body)]
             if s.argv[0] in ("python", "python3") or "-m grader" in s.text]
    assert found == []
    for doc in DOCS:
        if doc.name != "changelog.md":
            assert "python -m grader" not in doc.read_text(), doc.name


def _grader_argv(command: Shown) -> list[list[str]]:
    """A ``grader`` command's arguments: as written, and for a synopsis (``[...]``) without
    the optional parts and with them given."""
    argv = command.argv[1:]
    if not any("[" in word or "]" in word for word in argv):
        return [argv]
    bare = shlex.split(re.sub(r"\[[^\]]*\]", "", command.text))[1:]
    given = shlex.split(command.text.replace("[", "").replace("]", ""))[1:]
    return [bare, given]


def test_each_grader_command_is_one_the_parser_takes():
    commands = [c for c in _single_commands() if c.argv[0] in (".venv/bin/grader", "grader")]
    assert len(commands) >= 10
    refused = []
    for command in commands:
        for argv in _grader_argv(command):
            try:
                args = cli.build_parser().parse_args(argv)
            except SystemExit as stop:
                if stop.code != 0 or "--help" not in argv:
                    refused.append(f"{command.doc}: {command.text}")
                continue
            assert callable(args.func)
    assert refused == []


def test_the_quick_grader_commands_run_as_written(clone):
    commands = [c for c in _single_commands()
                if c.argv[0] == ".venv/bin/grader" and QUICK.search(" ".join(c.argv[1:]))]
    assert {" ".join(c.argv[1:]) for c in commands} >= {"--help",
                                                         "grade exercises --exercise softmax"}
    for command in {c.text: c for c in commands}.values():
        done = clone.run(command.argv)
        assert done.returncode == 0, f"{command.doc}: {command.text}\n{done.stderr[-2000:]}"
        if "--help" in command.argv:
            assert done.stdout.startswith("usage: grader"), done.stdout
        else:
            assert "softmax         0 / 15  not implemented yet" in done.stdout, done.stdout
            assert "Isolation" not in done.stdout + done.stderr  # a student's report


def test_each_make_command_is_a_target_whose_recipe_make_takes(clone):
    commands = [c for c in _single_commands() if c.argv[0] == "make"]
    assert len(commands) >= 15
    failed = []
    for command in {c.text: c for c in commands}.values():
        done = clone.run(["make", "-n", *command.argv[1:]])
        if done.returncode != 0 or "python -m pip" in done.stdout:
            failed.append(f"{command.doc}: {command.text}: {done.stderr.strip()[-300:]}")
    assert failed == []


def test_the_quick_make_commands_run_as_written(clone):
    shown_make = {c.text for c in _single_commands() if c.argv[0] == "make"}
    assert set(QUICK_MAKE) <= shown_make
    for command in QUICK_MAKE[1:]:
        done = clone.run(shlex.split(command))
        assert done.returncode == 0, f"{command}\n{done.stdout}{done.stderr}"
    assert (clone.folder / "build" / "stubs.json").is_file()


def test_make_grade_grades_the_stubs_as_the_readme_says(clone):
    done = clone.run(["make", "grade"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(".venv/bin/grader grade exercises\nGrading exercises\n")
    assert re.search(r"^total +0 / 100$", done.stdout, re.M), done.stdout
    assert done.stdout.count("not implemented yet") >= 12
    assert "Isolation" not in done.stdout and done.stderr == ""


def test_each_pytest_command_selects_the_checks(clone):
    commands = {c.text: c for c in _single_commands() if c.argv[0] == ".venv/bin/pytest"}
    assert len(commands) >= 4
    assert ".venv/bin/pytest exercises/attention.py -x" in commands
    for command in commands.values():
        done = clone.run([*command.argv, "--collect-only", "-q"])
        assert done.returncode == 0, f"{command.text}\n{done.stdout[-2000:]}{done.stderr}"
        items = [line for line in done.stdout.splitlines() if "::" in line]
        assert items and all(line.startswith("exercises/") for line in items), done.stdout
    # one of them for real: a stub's checks are xfails, and the table ends the run
    one = clone.run(shlex.split(".venv/bin/pytest exercises/attention.py -x"))
    assert one.returncode == 0, one.stdout
    assert re.search(r"^attention +0 / 20  not implemented yet$", one.stdout, re.M), one.stdout
    assert "XFAIL" not in one.stdout and "total 0 / 0" not in one.stdout


MARK = "@@ attention-kit doc line"


def _walk(clone: Clone, body: str) -> list[tuple[str, int, str]]:
    """The block's lines run in order in one shell, as a reader pastes them (``cd`` and
    ``. .venv/bin/activate`` hold for the lines after them), each to its end whatever the one
    before did: (line, exit status, what it printed) for each."""
    lines = _logical_lines(body)
    script = "exec 2>&1\n" + "".join(f"echo '{MARK} {i}'\n{line}\necho \"{MARK} exit $?\"\n"
                                      for i, line in enumerate(lines))
    done = clone.run(["bash", "-o", "pipefail", "-c", script], timeout=600)
    parts = re.split(rf"^{MARK} (\d+)\n", done.stdout, flags=re.M)[1:]
    walked = []
    for index, text in zip(parts[::2], parts[1::2]):
        output, _, status = text.rpartition(f"{MARK} exit ")
        walked.append((lines[int(index)], int(status.split()[0]), output))
    assert [line for line, _, _ in walked] == lines, done.stdout[-3000:]
    return walked


@pytest.mark.parametrize("block", _run_blocks(), ids=lambda b: b[1].split()[1])
def test_each_walkthrough_runs_top_to_bottom(clone, block):
    """The nbgrader workflow as an instructor without root (issue 45: it stopped at
    release_assignment, whose exchange needed root), and the Gradescope bundle tried locally.
    A line that fails here only because this test's interpreter cannot run a package installed
    for the kit's (see ``Clone.unusable``) is said, not failed."""
    doc, body = block
    walked = _walk(clone, body)
    harness = [line for line, status, output in walked if status != 0 and any(
        f"site-packages/{module}/" in output for module in clone.unusable)]
    failed = [f"{line}\n{output[-2000:]}" for line, status, output in walked
              if status != 0 and line not in harness]
    assert failed == [], f"{doc}:\n" + "\n".join(failed)
    for line in harness:
        print(f"not checked here: {line} (needs {', '.join(clone.unusable)} for a newer Python)")
    printed = "".join(output for _, _, output in walked)
    if body.startswith("make nbgrader"):
        grades = (clone.home / "attention-course" / "grades.csv").read_text()
        rows = grades.splitlines()  # the one student: this user, who fetched and submitted
        assert len(rows) == 2 and rows[1].startswith("attention,"), grades
        assert f"Creating exchange directory: {clone.home}/attention-course/exchange" in printed
        # every nbgrader command, the student's too, runs beside the settings it needs
        assert "No nbgrader_config.py file found" not in printed, printed
    if body.startswith("make gradescope"):
        assert '"score": 0' in printed and (clone.folder / "build" / "ag" / "results").is_dir()
