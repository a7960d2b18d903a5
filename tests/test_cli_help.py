"""Every command's --help is plain text with one example, and the example is a command the
parser takes (issue 39: the help showed the module's Markdown and no example)."""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys

import pytest

from grader.integrations import cli

MARKUP = re.compile(r"`|\*\*|\]\(")


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _commands(child, (*path, name))


COMMANDS = [path for path in _commands(cli.build_parser()) if path != ("bench",)]


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "grader")
def test_help_is_plain_text_with_an_example_the_parser_takes(path, capsys):
    with pytest.raises(SystemExit) as done:
        cli.build_parser().parse_args([*path, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert not MARKUP.search(text), text
    example = text.split("example:\n", 1)[1].strip().splitlines()[0]
    argv = shlex.split(example)
    assert argv[:3] == [*"python -m grader".split()]
    assert tuple(argv[3:3 + len(path)]) == path
    cli.build_parser().parse_args(argv[3:])  # exits with 2 on an example it does not take


def test_bench_help_is_plain_text_with_an_example():
    done = subprocess.run([sys.executable, "-m", "grader", "bench", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and not MARKUP.search(done.stdout)
    assert "example:\n  python -m grader bench " in done.stdout
