"""A class's records kept in a results folder, for ``report`` and ``merge`` to render again.

``batch --json-dir DIR`` (and each ``batch --shard`` task) writes, beside the ``<student>.json``
an instructor reads, every student's ``StudentRecord`` as its own fields in
``DIR/.records/<student>.json`` (``{"record": ..., "shard": K, "shards": N}``, the shard's
part only from a shard), each replaced whole, never half written. A hidden folder: a reader of
``DIR`` sees the students' JSON alone. ``report`` and ``merge`` read the records back, never
the JSON rendered from them.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
from pathlib import Path
from typing import Any

from .results import StudentRecord

FOLDER = ".records"


def json_name(student: str) -> str:
    """``<student>.json``, or, for a name too long for a file name, its first characters and
    a digest (the JSON then says whose it is under ``instructor.student``)."""
    file = f"{student}.json"
    if len(file.encode()) <= 255:
        return file
    digest = hashlib.sha256(student.encode()).hexdigest()[:16]
    return f"{student.encode()[:200].decode(errors='ignore')}~{digest}.json"


def replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole: a process killed meanwhile leaves the old file or
    none. The temporary name is short (a student's folder name may be as long as a name can
    be)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".tmp-{os.getpid()}-{next(_serial)}")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()


_serial = itertools.count()


def write(folder: str | os.PathLike[str], record: StudentRecord, **extra: Any) -> None:
    """Keep ``record`` (and ``extra``: a shard's index and count) in ``folder``'s records."""
    replace(Path(folder) / FOLDER / json_name(record.student),
            json.dumps({"record": record.to_dict(), **extra}) + "\n")


def read(folder: str | os.PathLike[str]) -> dict[str, tuple[StudentRecord, dict[str, Any]]]:
    """Every record kept in ``folder``, by student, with what was kept beside it. A file that
    is not a record gives a record that says so (``not graded: unreadable record``)."""
    found: dict[str, tuple[StudentRecord, dict[str, Any]]] = {}
    kept = Path(folder) / FOLDER
    for path in sorted(kept.glob("*.json")) if kept.is_dir() else []:
        if path.name.startswith("."):  # a temporary file of a process that was killed
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            record = StudentRecord.from_dict(data.pop("record"))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            student = path.name[:-len(".json")]
            found[student] = (StudentRecord(student, f"not graded: unreadable record "
                                                     f"{path.name} ({error})"), {})
            continue
        found[record.student] = (record, data)
    return found


def present(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` keeps records at all (a results folder of this kit's)."""
    return (Path(folder) / FOLDER).is_dir()
