"""A copy of the kit to change as an author does, and a ``.venv`` in it that runs the copy: for
the tests that add an exercise of their own (``test_contributing_guide``,
``test_no_key_convicted``).

Made in seconds, without a ``pip install``: the kit's tracked and untracked files (as
``as_user`` copies them), and a virtual environment of the same base interpreter whose one
``.pth`` file names the copy first, then this kit's installed packages (a ``.pth``-listed
folder's own ``.pth`` files are not read, so the kit's editable finder, which points at this
checkout, is not run). Its install stamps are newer than the files they depend on, so the
copy's ``make`` installs nothing.

Imported by the tests as a plain module, like ``submission_tools``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from as_user import _copy_kit

STAMPS = (".installed-core", ".installed-dev")  # the Makefile's install targets


def make(target: Path) -> Path:
    """The kit copied into ``target`` (made), with its ``.venv``; returns ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    _copy_kit(target)
    venv = target / ".venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True,
                   capture_output=True, timeout=120)
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True, timeout=60)
    Path(purelib.stdout.strip(), "attention-kit-copy.pth").write_text(
        f"{target}\n{sysconfig.get_paths()['purelib']}\n")
    for stamp in STAMPS:
        (venv / stamp).touch()
    return target


def run(folder: Path, command: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """``command`` run by bash in ``folder``, as a reader pastes it (stdout and stderr
    together in ``stdout``)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(["bash", "-c", command], cwd=folder, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout, env=env)
