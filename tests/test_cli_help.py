"""Every command's --help is plain text with one example, and the example is a command the
parser takes, written as a reader pastes it in the kit's folder (issue 39: the help showed the
module's Markdown and no example; issue 45: ``python -m grader`` is no command on a system
without ``python``)."""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys

import pytest
from submission_tools import KIT

from grader.integrations.routes import cli

MARKUP = re.compile(r"`|\*\*|\]\(")


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _commands(child, (*path, name))


COMMANDS = list(_commands(cli.build_parser()))


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "grader")
def test_help_is_plain_text_with_an_example_the_parser_takes(path, capsys):
    with pytest.raises(SystemExit) as done:
        cli.build_parser().parse_args([*path, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert not MARKUP.search(text), text
    assert text.startswith("usage: grader")
    example = text.split("example:\n", 1)[1].strip().splitlines()[0]
    argv = shlex.split(example)
    assert argv[0] == ".venv/bin/grader"  # the console script, as the docs write it
    assert tuple(argv[1:1 + len(path)]) == path
    cli.build_parser().parse_args(argv[1:])  # exits with 2 on an example it does not take


def test_bench_help_is_plain_text_with_an_example():
    done = subprocess.run([sys.executable, "-m", "tools.bench", "--help"], cwd=KIT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and not MARKUP.search(done.stdout)
    assert "example:\n  python -m tools.bench " in done.stdout


def _grade_in_a_terminal(*argv: str) -> tuple[str, str]:
    """``python -m grader grade ...`` with stderr on a terminal (a pseudo-terminal): what it
    printed there, and on stdout."""
    import os
    import pty

    master, slave = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "grader", "grade", *argv],
                              stdout=subprocess.PIPE, stderr=slave, text=True, timeout=600)
    finally:
        os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        err += chunk
    os.close(master)
    return err.decode(), done.stdout


def test_grade_in_a_terminal_prints_each_exercise_as_it_is_graded():
    """A student watching `make grade` saw nothing until every exercise was graded (issue 39);
    now a line for each as it finishes, on stderr, with the time so far. The report on stdout
    is the one a log or a pipe gets, which sees no such line."""
    from submission_tools import KIT

    key = str(KIT / "solutions")
    err, out = _grade_in_a_terminal(key, "--exercise", "softmax", "--exercise", "heads")
    lines = err.replace("\r\n", "\n").splitlines()
    assert sorted(line.split(" (")[0] for line in lines) == [
        "graded heads: 10 / 10", "graded softmax: 15 / 15"], err
    assert all(re.fullmatch(r"graded \w+: [\d.]+ / [\d.]+ \(\d+ s\)", line) for line in lines)
    piped = subprocess.run([sys.executable, "-m", "grader", "grade", key, "--exercise",
                            "softmax", "--exercise", "heads"], capture_output=True, text=True,
                           timeout=600)
    assert piped.stdout == out and "graded" not in piped.stderr
