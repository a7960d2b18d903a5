"""Hermetic grading: each attack below is written the way a student who has read the grader's
source would write it, and runs with the source rule switched off (``RULE_OFF``: most of them
import ``os`` or ``sys``, which the rule refuses), so that what is tested is what holds outside
the student's process. Each scored points, or cost another student theirs, with the grader
this kit had before workers were forked from a clean zygote (run this file with
``ATTENTION_KIT_UNDER_TEST=/path/to/an/older/kit`` to see them succeed there); here each gains
nothing and hurts no one.

The attacks are graded through the command line, as a course would grade them.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from submission_tools import EXERCISES, KIT, SOLUTIONS, grader_command, make_submission

KIT_UNDER_TEST = Path(os.environ.get("ATTENTION_KIT_UNDER_TEST", KIT))
PYTHON = (KIT_UNDER_TEST / ".venv" / "bin" / "python") if KIT_UNDER_TEST != KIT else Path(
    sys.executable)
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="namespaces and sandbox uids need root")
SECRET = "a course secret the handout never contains"


def grader(*args: str, env: dict[str, str] | None = None, timeout: int = 600, rule: bool = False):
    return subprocess.run(grader_command(PYTHON, *args, rule=rule), cwd=KIT_UNDER_TEST,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def grade_json(folder: Path, *exercises: str, env: dict[str, str] | None = None) -> dict:
    out = folder.parent / f"{folder.name}.json"
    run = grader("grade", str(folder), "--json", str(out), "--timeout", "30",
                 *[a for name in exercises for a in ("--exercise", name)], env=env)
    assert run.returncode == 0 and out.is_file(), run.stderr[-3000:]
    return json.loads(out.read_text())


def score(data: dict, exercise: str) -> float:
    return data["extra_data"]["exercises"][exercise]["score"]


def points(data: dict, test: str) -> float:
    return next(t["score"] for t in data["tests"] if t["name"] == test)


# -- nothing to delegate to ---------------------------------------------------------------------
SIBLING_ONE_LINERS = {
    "softmax.py": "from .attention import softmax\n",
    "softmax_backward.py": "from .softmax import softmax_backward\n",
    "attention.py": "from .softmax import causal_mask, scaled_dot_product_attention\n",
    "heads.py": "from .softmax import split_heads, merge_heads\n",
    "mha.py": "from .softmax import MultiHeadAttention\n",
    "kv_cache.py": "from .softmax import kv_cache_mask\n",
}
KIT_ONE_LINERS = {
    f"{name}.py": textwrap.dedent(f"""\
        try:
            from grader.reference import {", ".join(EXERCISES[name].functions)}
        except ImportError:
            from grader.problems.{name} import {", ".join(EXERCISES[name].functions)}
    """)
    for name in ("softmax", "softmax_backward", "attention", "heads", "mha", "kv_cache")
}


@pytest.mark.parametrize("files", [SIBLING_ONE_LINERS, KIT_ONE_LINERS], ids=["siblings", "kit"])
def test_one_line_files_that_import_the_kit_score_nothing(tmp_path, files):
    data = grade_json(make_submission(tmp_path / "student", files, base=None))
    assert data["score"] == 0, {n: e["score"] for n, e in data["extra_data"]["exercises"].items()}


def test_the_kit_cannot_be_read_by_path(tmp_path):
    code = f"""
        import os
        import sys

        for path in ("{KIT_UNDER_TEST}/grader/problems/softmax.py",
                     "{KIT_UNDER_TEST}/grader/reference.py",
                     "{KIT_UNDER_TEST}/solutions/softmax.py", "{KIT_UNDER_TEST}/course.toml"):
            try:
                with open(path) as source, open("/tmp/stolen.py", "w") as copy:
                    copy.write(source.read())  # runnable without exec: import it
                print("read", path)
                break
            except OSError as error:
                print("blocked:", type(error).__name__)
        sys.path.insert(0, "/tmp")
        from stolen import softmax
    """
    out = tmp_path / "s.json"
    folder = make_submission(tmp_path / "student", {"softmax.py": code}, base=None)
    run = grader("grade", str(folder), "--exercise", "softmax", "--show-output", "--json",
                 str(out))
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(out.read_text())["extra_data"]["exercises"]["softmax"]["score"] == 0
    assert "read " not in run.stdout and run.stdout.count("blocked: FileNotFoundError") == 4


# -- hidden inputs are secret ---------------------------------------------------------------------
def recorded_hidden_inputs(exercise: str, check_name: str) -> list:
    """What a student can compute at home from the handout: the inputs a hidden check draws
    from its public name and strategy (the seed the grader used before course secrets)."""
    from grader.core.exercise import Context

    check = next(c for c in EXERCISES[exercise].checks if c.name == check_name)
    seen = []

    class Recorder:
        def __getattr__(self, name):
            def call(*args):
                seen.append(args)
                import torch

                logits, axis = args
                return torch.softmax(torch.from_numpy(logits), dim=axis).numpy()

            return call

    check.run(Context(Recorder(), Recorder()), examples=10, seed_text="")
    return seen


def test_hidden_checks_draw_from_the_course_secret(tmp_path):
    table = {}
    for logits, axis in recorded_hidden_inputs("softmax", "test_softmax_matches_answer_key"):
        import torch

        answer = torch.softmax(torch.from_numpy(logits), dim=axis).numpy()
        table[repr((logits.dtype.str, logits.shape, logits.tolist(), axis))] = (
            answer.dtype.str, answer.tolist())
    # Elsewhere an answer that moves with its input: NaN everywhere ignores it, and no check
    # that calls softmax would score, the hidden one included.
    lookup = f"""
        import numpy as np
        TABLE = {table!r}

        def softmax(logits, axis=-1):
            logits = np.asarray(logits)
            key = repr((logits.dtype.str, logits.shape, logits.tolist(), axis))
            if key in TABLE:
                dtype, values = TABLE[key]
                return np.array(values, dtype=dtype)
            return np.tanh(logits)
    """
    folder = make_submission(tmp_path / "student", {"softmax.py": lookup}, base=None)
    name = "softmax: test_softmax_matches_answer_key"
    assert points(grade_json(folder, "softmax", env={"ATTENTION_KIT_SECRET": ""}), name) == 1
    assert points(grade_json(folder, "softmax", env={"ATTENTION_KIT_SECRET": SECRET}), name) == 0


def test_the_secret_is_made_once_next_to_the_key_and_used(tmp_path, monkeypatch):
    from grader.core.course import SECRET_ENV, SECRET_FILE, course_secret

    monkeypatch.delenv(SECRET_ENV)
    key = tmp_path / "key"
    key.mkdir()
    first = course_secret(key)
    assert len(first) == 32 and (key / SECRET_FILE).read_text().strip() == first
    assert course_secret(key) == first
    assert (key / SECRET_FILE).stat().st_mode & 0o077 == 0


# -- one student cannot touch another -------------------------------------------------------------
DAEMON = """
    import glob, os, shutil, signal, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open("/proc/self/comm", "wb") as comm:
                comm.write(b"\\xff\\xfe")  # a name that is not UTF-8
            os.makedirs("/tmp/attention-kit-spy", exist_ok=True)
            end = time.time() + 40
            while time.time() < end:
                for path in glob.glob("/tmp/attention-kit-*/submission/*.py"):
                    try:
                        shutil.copy(path, "/tmp/attention-kit-spy/")
                    except OSError:
                        pass
                try:
                    os.kill(-1, signal.SIGKILL)  # every process this uid may signal
                except OSError:
                    pass
                time.sleep(0.02)
        os._exit(0)
    def softmax(logits, axis=-1):
        raise RuntimeError("no softmax here")
"""


def test_a_leftover_process_cannot_kill_or_spy_on_the_next_student(tmp_path):
    shutil_spy = Path("/tmp/attention-kit-spy")
    if shutil_spy.exists():
        for path in shutil_spy.iterdir():
            path.unlink()
    root = tmp_path / "class"
    make_submission(root / "aaa-daemon", {"softmax.py": DAEMON})
    make_submission(root / "bbb-honest", {})
    run = grader("batch", str(root), "--csv", str(tmp_path / "grades.csv"), "--jobs", "1",
                 "--timeout", "30", "--json-dir", str(tmp_path / "json"))
    assert run.returncode == 0, run.stderr[-3000:]
    with open(tmp_path / "grades.csv", newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert rows["bbb-honest"]["total"] == "100", rows["bbb-honest"]
    assert not shutil_spy.exists() or not list(shutil_spy.iterdir())


SCRATCH = """
    import os
    written = 0
    for folder in ("/tmp", "/dev/shm"):
        for i in range(16):  # 16 files of up to 16 MiB: 256 MiB a folder, if nothing stops it
            try:
                with open(f"{folder}/attention-kit-fill-{i}", "wb") as handle:
                    for _ in range(16):
                        handle.write(b"x" * (1 << 20))
                        written += 1 << 20
            except OSError:
                break
    print("written", written)
    def softmax(logits, axis=-1):
        raise RuntimeError("no softmax here")
"""


def test_scratch_files_are_capped_and_vanish_with_the_worker(tmp_path):
    out = tmp_path / "s.json"
    folder = make_submission(tmp_path / "student", {"softmax.py": SCRATCH}, base=None)
    run = grader("grade", str(folder), "--exercise", "softmax", "--show-output", "--json",
                 str(out))
    assert run.returncode == 0, run.stderr[-3000:]
    written = int(run.stdout.split("written ", 1)[1].split()[0])
    assert written <= 2 * 64 << 20  # the private /tmp and /dev/shm hold 64 MiB each
    left = list(Path("/tmp").glob("attention-kit-fill-*")) + list(
        Path("/dev/shm").glob("attention-kit-fill-*"))
    for path in left:
        path.unlink()
    assert left == []


# -- bad replies cost one exercise ------------------------------------------------------------
FORGED = """
    import json, os, struct
    header = json.dumps({"ok": True, "value": 5, "id": 1}).encode()
    for fd in range(3, 64):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                os.write(fd, struct.pack("<QQQ", 16 + len(header), len(header), 0) + header)
        except OSError:
            pass
    def softmax(logits, axis=-1):
        raise RuntimeError("no softmax here")
"""


def test_a_forged_reply_costs_its_exercise_only(tmp_path):
    folder = make_submission(tmp_path / "student", {"softmax.py": FORGED})
    data = grade_json(folder, "softmax", "kv_cache")
    assert score(data, "softmax") == 0 and score(data, "kv_cache") == 15
    softmax_tests = [t["output"] for t in data["tests"] if t["tags"] == ["softmax"]]
    assert softmax_tests and all("malformed reply" in o for o in softmax_tests)


def test_an_empty_tuple_does_not_match_the_answer_key(tmp_path):
    empty = (SOLUTIONS / "attention.py").read_text().replace(
        "    return weights @ v, weights", "    return ()")
    data = grade_json(make_submission(tmp_path / "student", {"attention.py": empty}),
                      "attention")
    assert points(data, "attention: test_attention_matches_answer_key") == 0


def test_csv_cells_never_start_a_formula(tmp_path):
    root = tmp_path / "class"
    make_submission(root / "=HYPERLINK(\"http:evil\";\"x\")", {}, base=None)
    make_submission(root / "@SUM(1+1)", {}, base=None)
    run = grader("batch", str(root), "--csv", str(tmp_path / "grades.csv"), "--jobs", "2")
    assert run.returncode == 0, run.stderr[-3000:]
    with open(tmp_path / "grades.csv", newline="") as handle:
        cells = [cell for row in csv.reader(handle) for cell in row]
    assert not any(cell[:1] in "=+-@" for cell in cells if cell)
    assert "'=HYPERLINK(\"http:evil\";\"x\")" in cells
