"""The kit as an ordinary user runs it: a copy that uid 65534 owns, an interpreter it can run, and
the kit's installed packages, for the tests that grade (or submit to Slurm, or autograde an
nbgrader course) as that user (``setpriv``), from a process that is root.

Made once per test session, in seconds, without a ``pip install``: a virtual environment of
its own from ``/usr/bin/python3`` (the kit's ``.venv`` may sit under ``/root``, mode 700, which
uid 65534 cannot enter), whose one ``.pth`` file names the kit's installed packages: the
``.venv``'s own folder where that uid can read it, else a copy of it made of hard links (its
files stay root's, and readable), or a plain copy across file systems. The kit itself is on
``PYTHONPATH`` (a ``.pth``-listed folder's own ``.pth`` files, such as the kit's editable
finder, are not run). The copy holds the kit's tracked and untracked files, not its ignored
ones: as root, ``protect_key`` has made ``solutions/`` 0700.

Imported by the tests as a plain module, like ``submission_tools``.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

from submission_tools import KIT

UID = GID = 65534
IGNORED = (".venv", "build", "dist", ".hypothesis", ".pytest_cache", "__pycache__", "*.egg-info",
           ".git")


@dataclass(frozen=True)
class UserKit:
    base: Path  # everything of it: removed when the session ends
    folder: Path  # the kit's copy, owned by the user
    python: Path  # its interpreter, with the kit's packages
    env: dict[str, str]

    def command(self, *words: str | os.PathLike[str]) -> list[str]:
        """``words`` run as the user."""
        return ["setpriv", f"--reuid={UID}", f"--regid={GID}", "--clear-groups", "--",
                *map(str, words)]

    def run(self, *words: str | os.PathLike[str], cwd: Path | None = None, timeout: int = 900,
            **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(*words), cwd=cwd or self.folder, capture_output=True,
                              text=True, timeout=timeout, env={**self.env, **env})


def _can(command: list[str]) -> bool:
    done = subprocess.run(["setpriv", f"--reuid={UID}", f"--regid={GID}", "--clear-groups",
                           "--", *command], capture_output=True, timeout=60)
    return done.returncode == 0


@functools.cache
def why_not() -> str | None:
    """Why the tests cannot run as another user here, or None."""
    if os.geteuid() != 0:
        return "becoming uid 65534 needs root (these tests then run as this user already)"
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    if _interpreter() is None:
        return (f"no Python {sys.version_info.major}.{sys.version_info.minor} that uid {UID} "
                "can run (the kit's packages are built for it): /usr/bin/python3 or the "
                "kit's base interpreter")
    return None


@functools.cache
def _interpreter() -> str | None:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in ("/usr/bin/python3", getattr(sys, "_base_executable", ""),
                      f"/usr/bin/python{version}"):
        if candidate and os.path.exists(candidate) and _can(
                [candidate, "-c", f"import sys; assert '%d.%d' % sys.version_info[:2] == "
                                  f"'{version}'"]):
            return candidate
    return None


def _copy_kit(target: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=KIT,
                            capture_output=True)
    if listed.returncode != 0:  # not a git checkout: everything but what is built or cached
        shutil.copytree(KIT, target, ignore=shutil.ignore_patterns(*IGNORED), symlinks=True)
        return
    for name in filter(None, listed.stdout.decode().split("\0")):
        source, copy = KIT / name, target / name
        if source.is_file() or source.is_symlink():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy, follow_symlinks=False)


def _site_for_the_user(base: Path) -> Path:
    """The kit's installed packages as uid 65534 can read them (see the module docstring)."""
    site = Path(sysconfig.get_paths()["purelib"])
    if _can(["test", "-r", str(site / "numpy" / "__init__.py"), "-a", "-x", str(site)]):
        return site
    copy = base / "site-packages"
    linked = subprocess.run(["cp", "-al", str(site), str(copy)], capture_output=True)
    if linked.returncode != 0:
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(site, copy, symlinks=True)
    for folder, _, _ in os.walk(copy):  # folders made here are root's, 0755 at least
        os.chmod(folder, 0o755)
    return copy


def _chown(root: Path) -> None:
    os.chown(root, UID, GID)
    for folder, folders, files in os.walk(root):
        for name in folders + files:
            os.chown(os.path.join(folder, name), UID, GID, follow_symlinks=False)


@functools.cache
def kit() -> UserKit:
    """The copy, made once per session (see the module docstring)."""
    reason = why_not()
    if reason is not None:
        raise RuntimeError(reason)
    base = Path(tempfile.mkdtemp(prefix="attention-kit-as-user-"))
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    os.chmod(base, 0o755)
    folder, venv, home = base / "kit", base / "venv", base / "home"
    folder.mkdir()
    _copy_kit(folder)
    home.mkdir()
    subprocess.run([_interpreter(), "-m", "venv", "--without-pip", str(venv)], check=True,
                   capture_output=True)
    purelib = subprocess.run([venv / "bin" / "python", "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    Path(purelib, "attention-kit-packages.pth").write_text(f"{_site_for_the_user(base)}\n")
    for owned in (folder, venv, home):
        _chown(owned)
    env = {"HOME": str(home), "PATH": f"{venv / 'bin'}:/usr/bin:/bin", "LANG": "C.UTF-8",
           "PYTHONPATH": str(folder), "ATTENTION_KIT_SECRET": "",
           "PYTHONDONTWRITEBYTECODE": "1"}
    return UserKit(base, folder, venv / "bin" / "python", env)
