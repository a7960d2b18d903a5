"""The attack and limit tests, run again as an ordinary user (uid 65534), with the same verdicts.

Root is the exception in a real course: a Slurm task, a JupyterHub instructor's server and a
laptop grade as a user. There the workers get their namespaces from a user namespace of their
own and their bounds from rlimits (no cgroup is delegated on this machine), so the same
attacks must gain nothing there too: these files run in ``make test`` twice, as root (on their
own) and here as uid 65534, from a copy of the kit that uid owns (``as_user``). Where a bound
is weaker without root, the test itself says which (``tests/test_kernel_limits.py``). Beside
them: the node's check and ``grade``'s report as that user.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

import as_user
import pytest

pytestmark = pytest.mark.skipif(as_user.why_not() is not None, reason=str(as_user.why_not()))

# The class-run fuzz: its runs that grade (batch, Gradescope). Its readers and writers, fuzzed
# in one process with no worker, do the same as any user.
AS_USER = ["tests/test_out_of_reach.py", "tests/test_kernel_limits.py", "tests/test_audit_hook.py",
           "tests/test_syscalls.py",
           "tests/test_fuzz_class.py::test_batch_finishes_and_the_honest_row_is_untouched",
           "tests/test_fuzz_class.py::test_the_gradescope_run_always_leaves_a_results_json",
           "tests/test_hermetic.py::test_a_leftover_process_cannot_kill_or_spy_on_the_next_student",
           "tests/test_hermetic.py::test_the_kit_cannot_be_read_by_path",
           "tests/test_hermetic.py::test_scratch_files_are_capped_and_vanish_with_the_worker"]

WITHOUT_A_CGROUP = ("tests.test_kernel_limits::"
                    "test_a_students_busy_processes_get_one_cpu_and_stay_in_their_group")


def test_the_user_grades_in_user_namespaces_bounded_by_rlimits():
    kit = as_user.kit()
    probe = kit.run(kit.python, "-c", "import os; from grader.sandbox import node; "
                    "found = node.check(); print(os.geteuid(), found.isolated, found.label())")
    assert probe.stdout.split(None, 2) == [
        str(as_user.UID), "True", "user namespaces, rlimits; no CPU share\n"], probe


def test_grade_as_the_user_says_what_held_when_asked():
    """``grade -v`` ends its report with what the workers went without; a student's plain
    ``grade`` ends with their points (issue 45: every ``make grade`` ended with it)."""
    kit = as_user.kit()
    plain = kit.run(kit.python, "-m", "grader", "grade", "solutions", "--exercise", "softmax")
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert "Isolation" not in plain.stdout + plain.stderr
    done = kit.run(kit.python, "-m", "grader", "grade", "solutions", "--exercise", "softmax",
                   "-v")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "softmax        15 / 15  all checks pass" in done.stdout
    assert done.stdout.split("\nIsolation: ")[0] == plain.stdout
    note = done.stdout.split("\nIsolation: ", 1)[1].splitlines()
    held, _, others = note[0].partition("; no CPU share; ")
    assert held == "user namespaces, rlimits"
    # who else runs here: root's processes and the user's own never count
    assert re.fullmatch(r"no other user's process runs here|processes of \d+ other users? run "
                        r"here \((?!.*\bnobody\b).*\)", others), note[0]
    assert [line.split(":")[0] for line in note[1:]] == ["  - memory", "  - processes", "  - CPU"]


def test_the_attack_and_limit_tests_hold_as_an_unprivileged_user():
    kit = as_user.kit()
    report = kit.base / "home" / "as-user.xml"
    done = kit.run(kit.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                   f"--junitxml={report}", *AS_USER)
    outcomes = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcomes[f"{case.get('classname')}::{case.get('name')}"] = kinds[0] if kinds else "passed"
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert len(outcomes) > 30
    # Every one passed but the cgroup's CPU share, which this user has not: the test says so
    assert {name: kind for name, kind in outcomes.items() if kind != "passed"} == {
        WITHOUT_A_CGROUP: "skipped"}
    assert "no cgroup here: no CPU share" in done.stdout
