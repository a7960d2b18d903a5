"""A submission folder, copied where a worker may read it: what is copied, within which bounds,
and the answer key kept out of a worker's reach."""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path

from ..sandbox.isolation import unprivileged_user

MAX_SUBMISSION_BYTES = 20 << 20
MAX_ENTRIES = 2000  # files and folders a submission may hold (hidden ones aside)
MAX_DEPTH = 16  # folders deep
MAX_PATH = 1000  # characters of a path inside the submission


class BadSubmission(Exception):
    """The path given is not a folder that can be graded."""


def copy_submission(source: Path, target: Path, *, seconds: float = 60.0) -> None:
    """Copy the submission's files where an unprivileged worker can read them: what a worker
    may see (hidden names, caches and links left out, and their folders never entered), within
    ``MAX_SUBMISSION_BYTES``, ``MAX_ENTRIES`` names, ``MAX_DEPTH`` folders deep, ``MAX_PATH``
    characters a path and ``seconds`` of copying. BadSubmission says which bound it broke."""
    deadline = time.monotonic() + seconds
    total, entries = 0, 0
    todo: list[tuple[Path, Path, int]] = [(source, target, 0)]
    while todo:
        folder, into, depth = todo.pop()
        try:
            with os.scandir(folder) as found:
                items = sorted(found, key=lambda e: e.name)
        except OSError as error:
            raise BadSubmission(f"cannot read {folder.relative_to(source)}/ in the submission "
                                f"({error.strerror})") from None
        for item in items:
            if item.name.startswith(".") or item.name == "__pycache__":
                continue
            entries += 1
            relative = Path(item.path).relative_to(source)
            if entries > MAX_ENTRIES:
                raise BadSubmission(f"the submission holds more than {MAX_ENTRIES} files and "
                                    "folders (hidden ones aside)")
            if len(str(relative)) > MAX_PATH:
                raise BadSubmission(f"a path in the submission is longer than {MAX_PATH} "
                                    "characters")
            if time.monotonic() > deadline:
                raise BadSubmission(f"copying the submission took more than {seconds:g} s")
            if item.is_symlink():
                continue
            destination = into / item.name
            if item.is_dir():
                if depth + 1 > MAX_DEPTH:
                    raise BadSubmission(f"the submission's folders are more than {MAX_DEPTH} "
                                        "deep")
                destination.mkdir()
                os.chmod(destination, 0o755)
                todo.append((Path(item.path), destination, depth + 1))
            elif item.is_file():
                total += item.stat().st_size
                if total > MAX_SUBMISSION_BYTES:
                    raise BadSubmission(f"{source} holds more than "
                                        f"{MAX_SUBMISSION_BYTES >> 20} MiB")
                shutil.copyfile(item.path, destination)
                os.chmod(destination, 0o644)
    os.chmod(target, 0o755)


def protect_key(key_folder: Path) -> None:
    """When grading as root, keep the answer key out of the unprivileged worker's reach."""
    if unprivileged_user() is None:
        return
    mode = key_folder.stat().st_mode
    if mode & 0o077:
        os.chmod(key_folder, stat.S_IMODE(mode) & 0o700)
