"""The copy of a submission never follows a link and never reads with more rights than the
submission's owner (``grader.core.submission.copy_submission``, ``grader.core.reader``).

The attack: a student's own process, running while the folder is graded (a lab machine, a
JupyterHub home folder), swaps ``leak.py`` between a file and a link to a root-only file (here
a canary that looks like the course secret) thousands of times a second. On 4e1a685 the copy
listed ``leak.py`` as a file, then opened it again by name, as root, and followed the link: the
canary landed in the copy (in 1 to 15 of 50 copies a run, in six runs here), and the
student's ``heads.py`` (which keeps the source rule: ``import leak`` raises a SyntaxError whose
``text`` is the line) printed it into the results. Its ``softmax.py`` is the key's: graded in
full whatever happens to ``leak.py``.
"""

from __future__ import annotations

import contextlib
import csv
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from submission_tools import KIT, SOLUTIONS, make_submission

from grader.core import engine
from grader.core.submission import copy_submission

ROOT = os.geteuid() == 0
STUDENT = 65534  # the student's uid where the test runs as root (nobody)
SYSTEM_PYTHON = "/usr/bin/python3"  # an interpreter other users can run (not /root's)
SOFTMAX = (SOLUTIONS / "softmax.py").read_text()
HEADS = (SOLUTIONS / "heads.py").read_text() + textwrap.dedent("""
    try:  # what the student's code does with whatever leak.py holds: print it
        import leak
    except SyntaxError as error:
        print("LEAKED", error.text)
    except ImportError:
        pass
    """)
HONEST = b"HONEST = 1\n"
KEY_FILES = [p.name for p in SOLUTIONS.glob("*.py")]

# The student's process: leak.py a link to the canary, then a file, then a link... (one
# renameat2(RENAME_EXCHANGE) a swap, tens of thousands a second, at the lowest priority so
# that the grading it races is not slowed). It says when it has started, counts its swaps,
# prints the count when asked (SIGUSR1) and when it is stopped.
SWAPPER = r"""
import ctypes, os, signal, sys
folder, canary = sys.argv[1:3]
os.chdir(folder)
os.nice(19)
os.symlink(canary, ".swap")
libc = ctypes.CDLL(None, use_errno=True)
count = 0
def stop(*_):
    sys.stdout.write(f"{count}\n")
    sys.stdout.flush()
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGUSR1, lambda *_: os.write(1, f"{count}\n".encode()))
exchange = libc.renameat2
AT_FDCWD, RENAME_EXCHANGE, a, b = -100, 2, b".swap", b"leak.py"
sys.stdout.write("ready\n")
sys.stdout.flush()
while True:
    if exchange(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
    count += 1
"""


@pytest.fixture
def canary(tmp_path):
    """A root-only file (0600, in a 0700 folder) holding what looks like a course secret: 32
    hex digits, the first a digit, so ``import leak`` of it is a SyntaxError."""
    folder = tmp_path / "root-only"
    folder.mkdir(mode=0o700)
    path = folder / ".course-secret"
    text = "7" + secrets.token_hex(16)[1:]
    path.write_text(text + "\n")
    os.chmod(path, 0o600)
    return path, text


@pytest.fixture
def shared():
    """A folder every user may enter (the student's process must reach its own folder)."""
    base = Path(tempfile.mkdtemp(prefix="attention-kit-race-"))
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def student_folder(base: Path, name: str, owner: int | None) -> Path:
    """The key's files, but for the attacker's heads.py (the key's, printing what leak.py
    holds), and leak.py, owned by ``owner`` (None: this process's user). The seven files
    before leak.py give the old copy's window (listed, then opened by name) its width."""
    folder = make_submission(base / name, {"heads.py": HEADS})
    (folder / "leak.py").write_bytes(HONEST)
    if owner is not None:
        for path in [folder, *folder.iterdir()]:
            os.chown(path, owner, owner)
    return folder


class Swapper:
    def __init__(self, folder: Path, canary: Path, owner: int | None):
        user = {} if owner is None else {"user": owner, "group": owner, "extra_groups": []}
        python = SYSTEM_PYTHON if owner is not None else sys.executable
        self.process = subprocess.Popen([python, "-I", "-S", "-c", SWAPPER, str(folder),
                                         str(canary)], stdout=subprocess.PIPE, text=True,
                                        **user)
        assert self.process.stdout is not None
        assert self.process.stdout.readline() == "ready\n"
        self.count = 0

    def swaps(self) -> int:
        """How many times it has swapped so far."""
        assert self.process.stdout is not None
        self.process.send_signal(signal.SIGUSR1)
        return int(self.process.stdout.readline())

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate(timeout=10)
        self.count = int(out.strip() or 0)
        return self.count


@contextlib.contextmanager
def swapping(folder: Path, canary: Path, owner: int | None):
    swapper = Swapper(folder, canary, owner)
    try:
        yield swapper
    finally:
        swapper.stop()


def owners() -> list[int | None]:
    return [None, STUDENT] if ROOT and Path(SYSTEM_PYTHON).exists() else [None]


@pytest.mark.parametrize("owner", owners(), ids=lambda o: "own-folder" if o is None else "student")
def test_fifty_copies_under_a_swapping_link_hold_no_byte_of_the_canary(shared, canary, owner):
    """What the copy holds each time: the honest softmax.py, and leak.py either left out (a
    link when listed or opened) or the student's own ``HONEST = 1``; never the canary. The
    swapper runs at the lowest priority: on a busy machine (the suite split over its cores)
    the copies go on past fifty until it has swapped a hundred times while they ran."""
    path, text = canary
    folder = student_folder(shared, "student", owner)
    leaked, honest, attempt = [], 0, 0
    with swapping(folder, path, owner) as swapper:
        start, until = swapper.swaps(), time.monotonic() + 120
        while attempt < 50 or (swapper.swaps() - start <= 100 and time.monotonic() < until):
            copy = shared / f"copy-{attempt}"
            copy.mkdir()
            copy_submission(folder, copy)
            assert (copy / "softmax.py").read_text() == SOFTMAX
            held = b"".join(p.read_bytes() for p in copy.rglob("*") if p.is_file())
            if text.encode() in held:
                leaked.append(attempt)
            honest += (copy / "leak.py").is_file() and (copy / "leak.py").read_bytes() == HONEST
            attempt += 1
    # it swapped while the copies ran (tens of thousands of times in fifty copies, unloaded)
    assert swapper.count - start > 100
    assert not leaked, f"the canary was copied in {len(leaked)} of {attempt} copies"
    assert sorted(p.name for p in copy.iterdir()) in (sorted([*KEY_FILES, "leak.py"]),
                                                      sorted(KEY_FILES))


def read_everything(folder: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in sorted(folder.rglob("*"))
                   if p.is_file())


def test_grades_and_a_batch_under_a_swapping_link_show_no_byte_of_the_canary(shared, canary,
                                                                           tmp_path):
    """Three grades and a batch of three while the student's process swaps: the honest
    softmax is graded in full every time (15/15), and the canary is in no result, report,
    CSV or captured output. (heads.py scores 0 where leak.py was left out: it imports a
    module the submission does not hold.)"""
    from grader.core.course import load
    from grader.integrations.outputs import class_report, exports, report
    from grader.integrations.routes import batch

    path, text = canary
    owner = STUDENT if STUDENT in owners() else None
    classroom = shared / "class"
    classroom.mkdir()
    folder = student_folder(classroom, "mallory", owner)
    shutil.copytree(SOLUTIONS, classroom / "ada", ignore=shutil.ignore_patterns(".*"))
    control = "9" + secrets.token_hex(8)  # bob's own unparsable leak.py: the channel works
    (student_folder(classroom, "bob", None) / "leak.py").write_text(control + "\n")
    only = tmp_path / "course.toml"  # two cheap exercises: the copy is what is tested
    only.write_text("".join(f"[exercises.{name}]\nenabled = "
                            f"{str(name in ('softmax', 'heads')).lower()}\n"
                            for name in engine.load().names()))
    course = load(only)
    shown = []
    with swapping(folder, path, owner):
        for _ in range(3):
            result = engine.grade_submission(folder, course=course)
            assert result.exercises["softmax"].score == 15
            shown += [report.render(result, show_output=True),
                      str(report.to_json(result, include_output=True))]
        rows = batch.run(classroom, jobs=2, course=course, progress=None)
    out = tmp_path / "out"
    exports.write_grades(rows, out / "grades.csv", course)
    batch.write_json(rows, out / "json")
    class_report.build(rows, course, out / "report")
    assert [(r.student, r.status, r.scores["softmax"]) for r in rows] == [
        ("ada", "graded", 15), ("bob", "graded", 15), ("mallory", "graded", 15)]
    with open(out / "grades.csv", newline="") as handle:
        assert [line[:2] for line in csv.reader(handle)][1:] == [
            ["ada", "15"], ["bob", "15"], ["mallory", "15"]]
    assert rows[1].scores["heads"] == 10  # bob's heads.py printed his own leak.py, and passed
    everything = "".join(shown) + read_everything(out)
    assert f"LEAKED {control}" in read_everything(out / "json")
    assert text not in everything and text[:12] not in everything


def test_a_hard_link_to_a_root_file_is_not_copied(shared, canary):
    """The student's folder holds a second name of the root-only canary (made here by root:
    ``protected_hardlinks`` refuses it to the student on this machine, but a machine may
    allow it). Read as the student, the kernel refuses it; the file the student owns is
    copied."""
    if STUDENT not in owners():
        pytest.skip("needs root (a folder of another user's)")
    path, text = canary
    folder = student_folder(shared, "student", STUDENT)
    os.link(path, folder / "secret.py")
    copy = shared / "copy"
    copy.mkdir()
    copy_submission(folder, copy)
    assert sorted(p.name for p in copy.iterdir()) == sorted([*KEY_FILES, "leak.py"])
    assert text not in read_everything(copy)


def test_another_users_second_name_is_left_out_where_the_kernel_would_allow_it(shared, canary):
    """``reader.admitted``, without the reader taking the owner's rights (a grader that is not
    root): the second name of another's file, which its folder's owner could not read, is left
    out; the same file under its one name, or readable by anyone, is read."""
    from grader.core import reader

    path, _ = canary
    folder = shared / "student"
    folder.mkdir()
    os.link(path, folder / "secret.py")
    (folder / "own.py").write_text("x = 1\n")
    fake = os.stat(folder)
    theirs = os.stat_result((fake.st_mode | 0o777, *fake[1:4], STUDENT + 1, *fake[5:]))
    assert not reader.admitted(os.stat(folder / "secret.py"), theirs)
    assert reader.admitted(os.stat(folder / "own.py"), theirs)  # one name
    os.chmod(path, 0o644)
    assert reader.admitted(os.stat(folder / "secret.py"), theirs)  # anybody may read it
    if ROOT:  # in a folder no one but root could write, root made the name: the class's copy
        assert reader.admitted(os.stat(folder / "secret.py"), os.stat(folder))


# Run as uid 65534 (a grader that is not root): copy the student's folder (uid 65533's) while
# the student's process swaps leak.py for a link to the grader's own 0600 file, which also has
# a second name in the student's folder.
AS_GRADER = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from grader.core.submission import copy_submission
folder, copies, secret = Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
leaked = 0
for attempt in range(50):
    copy = copies / str(attempt)
    copy.mkdir()
    copy_submission(folder, copy)
    held = b"".join(p.read_bytes() for p in copy.rglob("*") if p.is_file())
    leaked += secret.encode() in held
    assert (copy / "softmax.py").is_file()
print(leaked)
"""


@pytest.mark.skipif(not ROOT or not Path(SYSTEM_PYTHON).exists() or not shutil.which("setpriv"),
                    reason="needs root to make the two users' files, and setpriv")
def test_a_grader_that_is_not_root_copies_neither_a_swapped_link_nor_a_second_name(shared):
    """The same attack where the grading user is not root (uid 65534 grades uid 65533's
    folder): its own 0600 file is what the link points to and what the second name names."""
    kit = shared / "kit"  # the modules the copy needs, where uid 65534 can read them
    for name in ("grader/__init__.py", "grader/core/__init__.py", "grader/core/reader.py",
                 "grader/core/submission.py"):
        (kit / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(KIT / name, kit / name)
    grader_home = shared / "grader"
    grader_home.mkdir(mode=0o711)
    secret = grader_home / "secret.txt"
    text = "7" + secrets.token_hex(16)[1:]
    secret.write_text(text + "\n")
    os.chmod(secret, 0o600)
    os.chown(secret, STUDENT, STUDENT)
    os.chown(grader_home, STUDENT, STUDENT)
    folder = student_folder(shared, "student", STUDENT - 1)
    os.link(secret, folder / "secret.py")  # as protected_hardlinks=0 would let the student
    copies = shared / "copies"
    copies.mkdir()
    os.chown(copies, STUDENT, STUDENT)
    with swapping(folder, secret, STUDENT - 1):
        done = subprocess.run(["setpriv", "--reuid", str(STUDENT), "--regid", str(STUDENT),
                               "--clear-groups", SYSTEM_PYTHON, "-c", AS_GRADER, str(kit),
                               str(folder), str(copies), text],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0", f"the secret was copied in {done.stdout.strip()} of 50"


# -- every route that reads a student's files -------------------------------------------------
def write_notebook(path: Path, marker: str) -> None:
    """The kit's core notebook, its heads cell saying ``marker``."""
    import json

    from grader.integrations.routes import notebook

    nb = notebook.notebook(track="core")
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == "heads":
            cell["source"] = f"%%exercise heads\n{marker} = 1\n"
    path.write_text(json.dumps(nb))


def test_nbgrader_reads_neither_a_linked_notebook_nor_a_linked_timestamp(shared, canary):
    """nbgrader's collected folder: ``attention.ipynb`` a link to another student's notebook,
    ``timestamp.txt`` a link to the canary. On 4e1a685 the first was graded as this
    student's, and the second copied into ``autograded/`` (which ``generate_feedback`` hands
    back to the student). Now the notebook is "missing" and the timestamp none."""
    from grader.integrations.routes.nbgrader_autograde import read_submission
    from grader.integrations.routes.nbgrader_gradebook import Layout, Submission

    path, _ = canary
    layout = Layout("attention", ["softmax", "heads"], {}, None)
    bob = shared / "bob" / "attention"
    bob.mkdir(parents=True)
    write_notebook(bob / "attention.ipynb", "BOBS_WORK")
    (bob / "timestamp.txt").write_text("2026-01-01 10:00:00.000000 UTC\n")
    mallory = shared / "mallory" / "attention"
    mallory.mkdir(parents=True)
    (mallory / "attention.ipynb").symlink_to(bob / "attention.ipynb")
    (mallory / "timestamp.txt").symlink_to(path)
    sub = read_submission(Submission("mallory", mallory), layout)
    assert sub.status == "missing notebook" and sub.text is None and sub.found is None
    assert getattr(sub, "timestamp", b"?") is None
    honest = read_submission(Submission("bob", bob), layout)
    assert honest.status == "graded"
    assert "BOBS_WORK" in honest.found.files["heads"]
    assert honest.timestamp == b"2026-01-01 10:00:00.000000 UTC\n"


def test_a_notebook_that_is_a_pipe_or_a_link_is_not_one(shared, canary):
    """``read_notebook`` never waits on a pipe (4e1a685's ``read_bytes`` waited for a writer
    that never came) nor follows a link."""
    import threading

    from grader.integrations.routes import notebook

    path, _ = canary
    pipe, link = shared / "pipe.ipynb", shared / "link.ipynb"
    os.mkfifo(pipe)
    link.symlink_to(path)
    said = {}

    def read() -> None:
        for name, where in (("pipe", pipe), ("link", link)):
            try:
                notebook.read_notebook(where)
            except notebook.NotANotebook as error:
                said[name] = str(error)

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():  # let the old code's open go on, so the thread ends
        os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
    assert said == {"pipe": "not a regular file", "link": "not a regular file"}


def test_gradescope_reads_the_upload_as_every_route_copies_it(shared, canary, tmp_path):
    """An upload holding a pipe named like a notebook (and a link to the key's attention.py):
    on 4e1a685 the run waited on the pipe for ever (Gradescope's timeout, no results); now it
    grades what is there."""
    import json
    import threading

    from grader.integrations.routes import gradescope

    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "source" / "course.toml").write_text(
        "".join(f"[exercises.{name}]\nenabled = {str(name == 'softmax').lower()}\n"
                for name in engine.load().names()))
    upload = root / "submission"
    upload.mkdir()
    (upload / "softmax.py").write_text(SOFTMAX)
    (upload / "attention.py").symlink_to(SOLUTIONS / "attention.py")
    os.mkfifo(upload / "answers.ipynb")
    done = {}
    worker = threading.Thread(target=lambda: done.update(gradescope.run(root)), daemon=True)
    worker.start()
    worker.join(120)
    if worker.is_alive():
        os.close(os.open(upload / "answers.ipynb", os.O_WRONLY | os.O_NONBLOCK))
        worker.join(60)
        pytest.fail("the Gradescope run waited on a pipe in the upload")
    softmax = done["extra_data"]["exercises"]["softmax"]  # no key: the visible checks alone
    assert softmax["score"] == softmax["max_score"] == 14, json.dumps(done)[:2000]


def test_a_copy_stopped_by_a_bound_leaves_no_descriptor_open(tmp_path):
    """The walk runs in the grading process where there are no rights to drop: a copy that a
    bound stops (here a file past 20 MiB, deep in nested folders) closes every folder it
    opened, however many copies fail."""
    from grader.core.submission import MAX_SUBMISSION_BYTES, BadSubmission

    deep = tmp_path / "student" / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "big.bin").write_bytes(b"\0" * (MAX_SUBMISSION_BYTES + 1))
    (deep.parent / "d").mkdir()  # a folder still waiting to be opened when the copy stops
    before = len(os.listdir("/proc/self/fd"))
    for attempt in range(20):
        (tmp_path / str(attempt)).mkdir()
        with pytest.raises(BadSubmission, match="more than 20 MiB"):
            copy_submission(tmp_path / "student", tmp_path / str(attempt))
    assert len(os.listdir("/proc/self/fd")) == before
