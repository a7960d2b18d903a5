"""Submissions that try to game the grader gain nothing, and leave the kit's files unchanged.

Every hostile ``softmax.py`` below returns NaN (or raises) unless its trick works, so any point
it scores came from the trick. The baseline case proves that NaN alone scores zero.

Each runs with the source rule switched off (the rule refuses their ``import os`` before any of
it runs): what is tested is what holds outside the student's process.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from submission_tools import (
    KIT,
    SOLUTIONS,
    grader_command,
    make_submission,
    rule_off,
    tree_digest,
)

from grader.core import engine
from grader.integrations.outputs import report
from grader.sandbox.confine import Limits
from grader.sandbox.isolation import OUTPUT_CAP

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(
    not ROOT, reason="only a root grader can drop student code to an unprivileged user"
)
LIMITS = Limits(timeout=20.0)
NAN = """
import numpy as np

def softmax(logits, axis=-1):
    return np.full(np.shape(logits), np.nan)
"""



@pytest.fixture(autouse=True)
def past_the_rule(monkeypatch):
    rule_off(monkeypatch)


def with_nan(code: str) -> str:
    """A hostile prelude, then the NaN softmax."""
    return textwrap.dedent(code) + NAN


CASES = {
    "nan_baseline": NAN,
    "reads_the_answer_key": f"""
        import sys
        KEY = {str(SOLUTIONS / "softmax.py")!r}
        try:
            with open(KEY) as key, open("/tmp/key_copy.py", "w") as copy:
                copy.write(key.read())  # runnable without exec: import it
            sys.path.insert(0, "/tmp")
            from key_copy import softmax
        except OSError as error:
            print("answer key blocked:", type(error).__name__)
            def softmax(logits, axis=-1):
                raise RuntimeError("no answer key")
    """,
    "imports_the_answer_key": f"""
        import sys
        sys.path.insert(0, {str(KIT)!r})
        try:
            from solutions.softmax import softmax
        except Exception as error:
            print("answer key blocked:", type(error).__name__)
            try:
                from answer_key.softmax import softmax
            except Exception:
                def softmax(logits, axis=-1):
                    raise RuntimeError("the key is not loaded")
    """,
    "patches_comparisons": NAN + """
import numpy.testing

always = lambda *args, **kwargs: True
np.allclose = np.array_equal = np.array_equiv = always
np.isclose = lambda a, b, *args, **kwargs: np.ones(np.broadcast(a, b).shape, bool)
np.testing.assert_allclose = np.testing.assert_array_equal = lambda *a, **k: None
np.testing.assert_array_almost_equal = lambda *a, **k: None
try:
    np.ndarray.__eq__ = lambda self, other: True
except TypeError:  # a built-in type; tried anyway
    pass
""",  # torch's comparisons too: a NumPy exercise may not touch torch (test_delegation.py)
    "returns_an_array_subclass": """
        import numpy as np

        class Liar(np.ndarray):
            def __eq__(self, other):
                return np.ones(self.shape, bool)
            __le__ = __ge__ = __eq__
            def __ne__(self, other):
                return np.zeros(self.shape, bool)
            def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
                return np.ones(self.shape, bool)
            def all(self, *a, **k):
                return True
            def sum(self, *a, **k):
                return 1.0

        def softmax(logits, axis=-1):
            return np.full(np.shape(logits), np.nan).view(Liar)
    """,
    "returns_odd_objects": """
        import numpy as np

        class Anything:
            __module__ = "torch.fake"  # looks like a tensor to a careless converter
            def __init__(self, shape):
                self.shape, self.dtype = shape, np.dtype("float64")
            def __eq__(self, other):
                return True
            def __array__(self, dtype=None, copy=None):
                return np.full(self.shape, np.nan)
            def detach(self):
                return self
            cpu = detach
            def numpy(self):
                return self
            def __len__(self):
                return self.shape[0] if self.shape else 0
            def __float__(self):
                return 1.0

        def softmax(logits, axis=-1):
            return Anything(np.shape(logits))
    """,
    "writes_into_the_grader": with_nan(f"""
        import glob, os
        kit = {str(KIT)!r}
        targets = glob.glob(kit + "/grader/**/*.py", recursive=True)
        targets += glob.glob(kit + "/grader/**/__pycache__/*.pyc", recursive=True)
        targets += glob.glob(kit + "/solutions/*")
        blocked = 0
        for target in targets:
            for attempt in (
                lambda: open(target, "a").write("\\nraise SystemExit\\n"),
                lambda: os.chmod(target, 0o777),
                lambda: os.rename(target, target + ".moved"),
                lambda: os.unlink(target),
            ):
                try:
                    attempt()
                except OSError:
                    blocked += 1
        for folder in (kit + "/grader", kit + "/grader/checks", kit + "/solutions"):
            try:
                open(folder + "/zz_planted.py", "w").write("POINTS = 100\\n")
            except OSError:
                blocked += 1
        print("blocked", blocked, "of", 4 * len(targets) + 3)
    """),
}


def grade(folder: Path):
    return engine.grade_submission(folder, exercises=["softmax"], limits=LIMITS)


@pytest.fixture(scope="module")
def kit_files():
    engine.grade_submission(SOLUTIONS, exercises=["softmax"], limits=LIMITS)  # warm caches
    return tree_digest(KIT / "grader", SOLUTIONS)


@pytest.mark.parametrize("case", sorted(CASES))
def test_tampering_gains_no_points(case, tmp_path, kit_files):
    if case in ("reads_the_answer_key", "imports_the_answer_key", "writes_into_the_grader"):
        if not ROOT:
            pytest.skip("as a non-root grader these would succeed (see the README)")
    result = grade(make_submission(tmp_path / "student", {"softmax.py": CASES[case]}))
    softmax = result.exercises["softmax"]
    assert softmax.error is None  # graded to the end: no time-out or crash hid the trick
    assert softmax.score == 0, [c.name for c in softmax.checks if c.passed]
    assert tree_digest(KIT / "grader", SOLUTIONS) == kit_files
    if "answer_key" in case:
        assert "answer key blocked" in softmax.output
    if case == "writes_into_the_grader":
        blocked, _, total = softmax.output.split()[1:4]
        assert blocked == total


def test_printed_results_are_never_reported(tmp_path):
    """What the student prints, on any descriptor, reaches neither the report nor the JSON."""
    folder = make_submission(tmp_path / "student", {"softmax.py": with_nan("""
        import os, sys
        FAKE = "FAKE-RESULT softmax 15 / 15 all checks pass; total 100 / 100"
        print(FAKE)
        print(FAKE, file=sys.__stderr__)
        os.write(1, FAKE.encode())
        for path in (f"/proc/{os.getppid()}/fd/1", f"/proc/{os.getppid()}/fd/2", "/dev/tty"):
            try:
                with open(path, "w") as stream:
                    stream.write(FAKE)
            except OSError:
                pass
        print("x" * 100_000)
    """)})
    command = grader_command(sys.executable, "grade", str(folder), "--exercise", "softmax",
                             "--json", str(tmp_path / "results.json"), rule=False)
    plain = subprocess.run(command, capture_output=True, text=True, cwd=KIT, timeout=120)
    assert plain.returncode == 0, plain.stderr
    assert "FAKE-RESULT" not in plain.stdout + plain.stderr
    assert re.search(r"^softmax +0 / 15 ", plain.stdout, re.M)
    results = (tmp_path / "results.json").read_text()
    assert "FAKE-RESULT" not in results and json.loads(results)["score"] == 0
    shown = subprocess.run(command + ["--show-output"], capture_output=True, text=True, cwd=KIT,
                           timeout=120)
    view = shown.stdout.split("== what softmax printed (instructor view) ==")
    assert len(view) == 2 and "FAKE-RESULT" in view[1]
    assert len(view[1]) < OUTPUT_CAP + 200 and "[... output truncated]" in view[1]


@needs_root
def test_killing_the_grader_fails(tmp_path):
    folder = make_submission(tmp_path / "student", {"softmax.py": with_nan("""
        import os, signal
        own = os.getpid()
        for target in (os.getppid(), -os.getppid(), os.getpgid(os.getppid())):
            try:
                os.kill(target, signal.SIGKILL)
            except OSError:
                pass
        if os.getuid() != 0:  # never as root: -1 means every process the user may signal
            for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
                if pid != own:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
    """)})
    json_path = tmp_path / "results.json"
    run = subprocess.run(
        grader_command(sys.executable, "grade", str(folder), "--json", str(json_path),
                       "--exercise", "softmax", "--exercise", "kv_cache", rule=False),
        capture_output=True, text=True, cwd=KIT, timeout=300,
    )
    assert run.returncode == 0, run.stderr
    scores = json.loads(json_path.read_text())["extra_data"]["exercises"]
    assert scores["softmax"]["score"] == 0
    assert all(scores[name]["score"] == scores[name]["max_score"] for name in scores
               if name != "softmax")


def test_network_is_unreachable(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    port = server.getsockname()[1]
    folder = make_submission(tmp_path / "student", {"softmax.py": f"""
        import _socket, socket
        import numpy as np
        reached = []
        for connect in (
            lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2),
            lambda: _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM).connect(
                ("127.0.0.1", {port})),
        ):
            try:
                connect()
                reached.append(True)
            except OSError as error:
                print("network blocked:", error)

        def softmax(logits, axis=-1):
            if not reached:
                raise RuntimeError("no network")
            x = np.asarray(logits, dtype=np.result_type(np.asarray(logits).dtype, np.float32))
            e = np.exp(x - x.max(axis=axis, keepdims=True))
            return e / e.sum(axis=axis, keepdims=True)
    """})
    try:
        result = grade(folder)
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()
    assert result.exercises["softmax"].score == 0
    # Twice in each of the exercise's two workers (the visible checks', the hidden checks').
    assert result.exercises["softmax"].output.count("network blocked") == 4


def processes_in_namespace(namespace: str) -> list[str]:
    """Live processes (not zombies) whose PID namespace is ``namespace``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if os.readlink(entry / "ns" / "pid") == namespace and state not in "ZX":
                found.append(entry.name)
        except (OSError, IndexError):
            continue
    return found


@needs_root
def test_escaped_processes_are_killed(tmp_path):
    """Daemons forked out of the worker's session, one renamed to bytes that are not UTF-8
    (it hid from the old sweep by uid), are gone once the exercise is graded."""
    folder = make_submission(tmp_path / "student", {"softmax.py": with_nan("""
        import os, time
        print("namespace", os.readlink("/proc/self/ns/pid"), flush=True)
        for name in (b"daemon", b"\\xff\\xfe hidden"):
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    with open("/proc/self/comm", "wb") as comm:  # its name, as ps shows it
                        comm.write(name)
                    time.sleep(60)
                    open("/tmp/attention-kit-escaped", "w").write("still here")
                os._exit(0)
        time.sleep(0.5)
    """)})
    result = grade(folder)
    assert result.exercises["softmax"].score == 0
    namespace = result.exercises["softmax"].output.split("namespace ", 1)[1].split()[0]
    assert namespace != os.readlink("/proc/self/ns/pid")  # the worker had a namespace
    deadline = time.monotonic() + 3.0
    while processes_in_namespace(namespace) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_in_namespace(namespace) == []


def test_report_json_has_no_student_output(tmp_path):
    folder = make_submission(
        tmp_path / "student", {"softmax.py": with_nan("print('PRINTED-BY-STUDENT')")}
    )
    result = grade(folder)
    assert "PRINTED-BY-STUDENT" in result.exercises["softmax"].output
    assert "PRINTED-BY-STUDENT" not in json.dumps(report.to_json(result))
    assert "PRINTED-BY-STUDENT" not in report.render(result)
