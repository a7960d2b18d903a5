"""Who else runs on the grading machine (issue 44, part 4): the isolation line an instructor's
route prints names the other users whose processes the grading process can see at start
(``grader.sandbox.node.neighbours``), since no namespace hides a worker from them: they see
what ``/proc`` shows of it (unless ``hidepid``), and share its page cache and CPUs.

"Other users" are the uids of the processes ``/proc`` shows, less the grading user's own,
root's (the system's, which sees everything anyway) and the kit's sandbox uids (workers, which
no account holds). A row's status stays as it was: the records hold nothing that varies from
one run to the next.
"""

from __future__ import annotations

import os
import pwd
import re
import subprocess
import sys
from pathlib import Path

import pytest
from submission_tools import SOLUTIONS

from grader.integrations.routes.cli_common import isolation_note
from grader.sandbox import node
from grader.sandbox.confine import SANDBOX_UID_BASE

STRANGER = 61234  # a uid no account has, outside the sandbox uids
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="runs a process as another user")


def fake_proc(folder: Path, uids: dict[int, int | None]) -> Path:
    """A /proc of processes ``pid -> real uid`` (None: its status unreadable, as hidepid=1
    leaves it, so its folder's owner counts), with files that are not processes beside."""
    for pid, uid in uids.items():
        (folder / str(pid)).mkdir(parents=True)
        if uid is not None:
            (folder / str(pid) / "status").write_text(
                f"Name:\tx\nUmask:\t0022\nUid:\t{uid}\t{uid + 1}\t{uid}\t{uid}\nGid:\t0\n")
    (folder / "self").mkdir()
    (folder / "meminfo").write_text("MemTotal: 1 kB\n")
    return folder


def test_other_users_are_counted_by_real_uid_less_root_ours_and_the_sandboxes(tmp_path):
    taken = {p.pw_uid for p in pwd.getpwall()}
    free = next(uid for uid in range(SANDBOX_UID_BASE, SANDBOX_UID_BASE + 100)
                if uid not in taken)  # a sandbox uid: a worker's
    proc = fake_proc(tmp_path / "proc", {1: 0, 2: os.getuid(), 3: free, 4: STRANGER,
                                         5: STRANGER, 6: None})
    found = node.neighbours(str(proc))
    owner = os.stat(proc / "6").st_uid  # pid 6's folder: ours, so it does not count
    assert owner == os.getuid()
    assert found == (f"uid {STRANGER}",)
    if 1 in taken:  # an account's name, where it has one (daemon, on most systems)
        named = node.neighbours(str(fake_proc(tmp_path / "named", {7: 1, 8: STRANGER})))
        assert named == tuple(sorted([pwd.getpwuid(1).pw_name, f"uid {STRANGER}"]))


def test_the_line_names_them_and_says_so_when_none(tmp_path):
    full = node.NodeIsolation("root")
    assert full.line() == ""  # not counted: as before
    assert node.NodeIsolation("root", others=()).line() == ""  # nothing to say
    assert node.NodeIsolation("root", others=("ana",)).line() == (
        "namespaces, cgroups; processes of 1 other user run here (ana)")
    weak = node.NodeIsolation("user", "rlimits", (), others=())
    assert weak.line() == ("user namespaces, rlimits; no CPU share; "
                           "no other user's process runs here")
    assert weak.label() == "user namespaces, rlimits; no CPU share"  # a row's status: as it was
    many = node.NodeIsolation("user", "rlimits", (), others=tuple("abcdefg"))
    assert many.line().endswith("processes of 7 other users run here (a, b, c, d, e and 2 more)")
    hidden = node.NodeIsolation("user", "rlimits", (), others=(), hidepid=True)
    assert hidden.line().endswith("; /proc hides other users' processes here (hidepid)")
    assert isolation_note(many).splitlines()[0] == f"Isolation: {many.line()}"
    assert isolation_note(full) == ""


@pytest.mark.parametrize("options, hides", [("rw", False), ("rw,hidepid=2", True),
                                            ("rw,hidepid=invisible", True),
                                            ("rw,hidepid=0", False), ("rw,hidepid=off", False)])
def test_hidepid_is_read_from_procs_mount(tmp_path, options, hides):
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text("21 27 0:20 / /sys rw,nosuid - sysfs sysfs rw,hidepid=2\n"
                         f"22 27 0:21 / /proc rw,relatime - proc proc {options}\n")
    assert node.hidepid(str(mountinfo)) is hides


@root_only
def test_a_process_of_another_user_is_named_in_grades_isolation_line(tmp_path):
    """``grade`` as root with every bound held printed no isolation line; with a process of
    another user running here, it names that user."""
    taken = {p.pw_uid for p in pwd.getpwall()}
    assert STRANGER not in taken
    sandbox = next(uid for uid in range(SANDBOX_UID_BASE + 3000, SANDBOX_UID_BASE + 3100)
                   if uid not in taken)
    sleepers = [subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}",
                                  "--clear-groups", "sleep", "120"])
                for uid in (STRANGER, sandbox)]
    try:
        seen = node.check()
        assert f"uid {STRANGER}" in (seen.others or ())
        assert f"uid {sandbox}" not in (seen.others or ())
        done = subprocess.run([sys.executable, "-m", "grader", "grade", str(SOLUTIONS),
                               "--exercise", "softmax", "-v"], capture_output=True, text=True,
                              timeout=600)
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()
    assert done.returncode == 0, done.stderr
    line = next(text for text in done.stdout.splitlines() if text.startswith("Isolation: "))
    assert re.search(r"; processes of \d+ other users? run here \(.*\buid 61234\b.*\)$", line)
    assert f"uid {sandbox}" not in line


@pytest.mark.parametrize("route", ["batch", "nbgrader autograde"])
def test_each_instructors_route_prints_the_isolation_note_once(route, tmp_path, monkeypatch,
                                                               capsys):
    """Once a run, where the route's output says it: ``nbgrader autograde`` printed it twice
    (on stderr as it checked the machine, and again under its table)."""
    from grader.integrations.routes import cli
    from grader.integrations.routes import nbgrader_autograde as autograde

    weak = node.NodeIsolation("user", "rlimits", (), others=("ana",))
    monkeypatch.setattr(node, "check", lambda: weak)
    note = isolation_note(weak)
    assert note.startswith("Isolation: user namespaces, rlimits; ") and "ana" in note
    if route == "batch":
        (tmp_path / "class" / "ada").mkdir(parents=True)  # empty: no worker needed
        course = tmp_path / "course.toml"  # softmax alone
        course.write_text("".join(f"[exercises.{name}]\nenabled = false\n\n"
                                  for name in cli.load().names() if name != "softmax"))
        args = ["batch", str(tmp_path / "class"), "--csv", str(tmp_path / "grades.csv"),
                "--course", str(course)]
    else:  # the grading itself is test_nbgrader_autograde's: here, a course with no notebook
        monkeypatch.setattr(autograde, "autograde", lambda *args, **kwargs: [])
        args = ["nbgrader", "autograde", "--course", str(tmp_path)]
    assert cli.main(args) == 0
    printed = capsys.readouterr()
    assert (printed.out + printed.err).count(note) == 1, printed
    assert (printed.out + printed.err).count("Isolation: ") == 1, printed
    if route == "nbgrader autograde":  # under its table
        assert printed.out.rstrip().endswith(note), printed.out
