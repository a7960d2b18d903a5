"""nbgrader on JupyterHub, where nobody is root: the instructor's uid releases the assignment
to an exchange and collects it with nbgrader's own commands (so every folder and file has the
owner and mode nbgrader gives it: the inbound folder writable by all and readable by none but
the instructor, the submission the student's own), a student of a uid of their own submits,
and ``python -m grader nbgrader autograde`` grades it as the instructor's uid.

The student's notebook holds the key's answers but for ``heads``, which is the hostile cell of
the root course (``nbgrader_tools.HOSTILE``: read the source notebook and the answer key, zero
the gradebook, plant a file in its own feedback), past the source rule as the root course's is.
As the instructor's uid the workers run as that uid, which owns the course and the key: only
their namespaces (a user namespace each) keep them out.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import as_user
import nbgrader_tools as tools
import pytest
from submission_tools import grader_command

pytestmark = pytest.mark.skipif(as_user.why_not() is not None, reason=str(as_user.why_not()))

STUDENT, STUDENT_UID = "mallory", 65533
ISOLATION = "Isolation: user namespaces, rlimits; no CPU share"


def as_uid(uid: int, words: list[str], cwd, env: dict[str, str], passwd=None) -> str:
    """``words`` as ``uid``; with ``passwd``, in a mount namespace whose /etc/passwd is that
    file (nbgrader names a student by their account: these two have none on this machine)."""
    command = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *words]
    if passwd is not None:
        command = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                   'mount --bind "$0" /etc/passwd && exec "$@"', str(passwd), *command]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, f"{words} as {uid}:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def hub(released_course):
    kit = as_user.kit()
    hub = kit.base / "hub"
    hub.mkdir(mode=0o755)
    exchange = hub / "exchange"
    exchange.mkdir()
    exchange.chmod(0o777)  # as nbgrader's documentation has the administrator make it
    course = hub / "course"
    shutil.copytree(released_course, course)
    for folder, _, files in os.walk(course):
        for name in [folder, *(os.path.join(folder, f) for f in files)]:
            os.chown(name, as_user.UID, as_user.GID)

    def env(home, user: str) -> dict[str, str]:
        return {**tools.env(home), **{k: v for k, v in kit.env.items() if k != "HOME"},
                "HOME": str(home), "USER": user, "LOGNAME": user}

    instructor = env(kit.base / "home", "instructor")
    flags = [f"--Exchange.root={exchange}"]
    nbgrader = [str(kit.python), "-m", "nbgrader"]
    as_uid(as_user.UID, [*nbgrader, "release_assignment", "attention", *flags], course,
           instructor)
    release, key = tools.read(course / tools.RELEASE), tools.key_answers(course)
    attack = tools.HOSTILE.format(course=course, source=tools.SOURCE,
                                  key=kit.folder / "solutions")
    heads = ("%%exercise heads\n" + attack + "\n\ndef split_heads(x, n_head):\n"
             "    raise RuntimeError(LEAK)\n\n\ndef merge_heads(x):\n"
             "    raise RuntimeError(LEAK)\n")
    passwd = hub / "passwd"
    passwd.write_text(Path("/etc/passwd").read_text()
                      + f"{STUDENT}:x:{STUDENT_UID}:{STUDENT_UID}::{hub / STUDENT}:/bin/sh\n")
    passwd.chmod(0o644)
    home = hub / STUDENT
    (home / "attention").mkdir(parents=True)
    (home / "attention" / "attention.ipynb").write_text(
        json.dumps(tools.with_answers(release, {**key, "heads": heads})))
    for folder, _, files in os.walk(home):
        for name in [folder, *(os.path.join(folder, f) for f in files)]:
            os.chown(name, STUDENT_UID, STUDENT_UID)
    as_uid(STUDENT_UID, [*nbgrader, "submit", "attention", "--course", "attention-kit", *flags],
           home, env(home, STUDENT), passwd)
    as_uid(as_user.UID, [*nbgrader, "collect", "attention", *flags], course, instructor)
    structure = tools.structure(course)
    printed = as_uid(as_user.UID, grader_command(kit.python, "nbgrader", "autograde",
                                                 "--course", str(course), rule=False),
                     course, instructor)
    return course, exchange, printed, structure


def scores(course: Path, student: str) -> dict[str, float]:
    """Each grade cell's score in the gradebook, as nbgrader counts it (a manual score over
    the automatic one)."""
    with sqlite3.connect(course / "gradebook.db") as db:
        return dict(db.execute(
            "SELECT base_cell.name, COALESCE(grade.manual_score, grade.auto_score) FROM grade "
            "JOIN base_cell ON grade.cell_id = base_cell.id "
            "JOIN submitted_notebook ON grade.notebook_id = submitted_notebook.id "
            "JOIN submitted_assignment ON submitted_notebook.assignment_id = "
            "submitted_assignment.id WHERE submitted_assignment.student_id = ?", (student,)))


def test_the_exchange_holds_what_nbgrader_made_the_submission_the_students(hub):
    course, exchange, _, _ = hub
    inbound = exchange / "attention-kit" / "inbound"
    assert inbound.stat().st_uid == as_user.UID and inbound.stat().st_mode & 0o777 == 0o733
    (submitted,) = inbound.iterdir()
    assert submitted.name.split("+")[:2] == [STUDENT, "attention"]
    assert submitted.stat().st_uid == STUDENT_UID
    assert [p.name for p in (course / "submitted").iterdir()] == [STUDENT]


def test_autograde_as_the_instructor_grades_and_says_what_held(hub):
    _, _, printed, _ = hub
    assert "1 of 1 notebook graded" in printed and ISOLATION in printed, printed
    assert printed.count("Isolation: ") == 1, printed  # once a run (it came twice)


def test_the_hostile_cell_reached_neither_gradebook_nor_key_as_the_instructor(hub):
    course, _, _, structure = hub
    assert tools.structure(course) == structure  # nothing of the gradebook changed
    grades = scores(course, STUDENT)
    assert grades["heads_tests"] == 0 and sum(grades.values()) == 90, grades
    assert not (course / "feedback" / "hostile").exists()
    nb = tools.read(course / "autograded" / STUDENT / "attention" / "attention.ipynb")
    heads = "".join("".join(o.get("text", "")) for o in tools.cells(nb)["heads_tests"]["outputs"])
    assert "refused: " in heads and "def softmax" not in heads, heads
