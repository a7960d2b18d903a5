"""The red team's attacks, each written as the student who read the grader's source wrote it,
and each measured to succeed on the kit before workers got an allow-list root, a fixed
environment and printable feedback (run with ``ATTENTION_KIT_UNDER_TEST=/path/to/that/kit``
to see them succeed there). Here each gains nothing and leaves nothing behind.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
from submission_tools import make_submission
from test_hermetic import grade_json, grader, needs_root, score

from grader.sandbox import isolation

# -- another exercise's code does the work --------------------------------------------------
# Softmax is attention with one query of width 1 and the logits as keys; attention's weights
# are its output with v = I; the KV-cache mask is the last rows of a causal mask. Each file
# imports only a sibling exercise, as the README invites, and writes none of its own answer.
SOFTMAX_BY_ATTENTION = """
    import numpy as np
    from .attention import scaled_dot_product_attention

    def softmax(logits, axis=-1):
        x = np.moveaxis(np.asarray(logits, dtype=np.result_type(np.asarray(logits), np.float32)),
                        axis, -1)
        q = np.ones((*x.shape[:-1], 1, 1), x.dtype)
        v = np.zeros((*x.shape, 1), x.dtype)
        _, weights = scaled_dot_product_attention(q, x[..., None], v)
        return np.moveaxis(weights[..., 0, :], -1, axis)
"""
ATTENTION_BY_FLASH = """
    import numpy as np
    from .flash import flash_attention
    from .kv_cache import kv_cache_mask

    def causal_mask(t):
        return kv_cache_mask(0, t)

    def scaled_dot_product_attention(q, k, v, mask=None):
        eye = np.eye(np.shape(k)[-2], dtype=np.result_type(q, k, np.float32))
        return flash_attention(q, k, v, mask), flash_attention(q, k, eye, mask)
"""
KV_CACHE_BY_ATTENTION = """
    from .attention import causal_mask

    def kv_cache_mask(n_cached, n_new):
        return causal_mask(n_cached + n_new)[n_cached:]
"""


@pytest.mark.parametrize("exercise, code", [
    ("softmax", SOFTMAX_BY_ATTENTION), ("attention", ATTENTION_BY_FLASH),
    ("kv_cache", KV_CACHE_BY_ATTENTION),
], ids=["softmax-by-attention", "attention-by-flash", "kv-cache-by-attention"])
def test_another_exercises_code_does_none_of_the_work(tmp_path, exercise, code):
    folder = make_submission(tmp_path / "student", {f"{exercise}.py": code}, base=None)
    assert score(grade_json(folder, exercise), exercise) == 0


# -- nothing outside the submission is there --------------------------------------------------
COPY_A_CLASSMATE = """
    import os, shutil, sys
    try:
        os.makedirs("/tmp/peer", exist_ok=True)
        shutil.copyfile({alice!r}, "/tmp/peer/alice_kv_cache.py")
        sys.path.insert(0, "/tmp/peer")
        from alice_kv_cache import kv_cache_mask
    except OSError as error:
        print("nothing to copy:", type(error).__name__)
"""


@needs_root
def test_a_classmates_folder_elsewhere_on_the_machine_is_not_there():
    # Outside /tmp and outside the kit, where only an allow-list root hides it.
    course = Path("/var/tmp") / f"attention-kit-course-{uuid.uuid4().hex[:8]}"
    try:
        alice = make_submission(course / "alice")
        mallory = make_submission(course / "mallory", {
            "kv_cache.py": COPY_A_CLASSMATE.format(alice=str(alice / "kv_cache.py"))}, base=None)
        data = grade_json(mallory, "kv_cache")
    finally:
        shutil.rmtree(course, ignore_errors=True)
    assert score(data, "kv_cache") == 0
    assert "does not define kv_cache_mask" in data["tests"][0]["output"]


LEAVE_A_FILE = """
    import os
    for folder in ("/var/tmp", "/run/lock", "/dev/shm"):
        try:
            with open(os.path.join(folder, {name!r}), "w") as handle:
                handle.write("for the next worker")
        except OSError:
            pass

    def split_heads(x, n_head):
        raise RuntimeError("no heads here")
"""


@needs_root
def test_files_left_outside_tmp_do_not_outlive_the_worker(tmp_path):
    name = f"attention-kit-left-{uuid.uuid4().hex[:8]}"
    folder = make_submission(tmp_path / "student", {"heads.py": LEAVE_A_FILE.format(name=name)},
                             base=None)
    grade_json(folder, "heads")
    left = [Path(f, name) for f in ("/var/tmp", "/run/lock", "/dev/shm") if Path(f, name).exists()]
    for path in left:
        path.unlink()
    assert left == []


def test_the_graders_environment_never_reaches_a_worker(monkeypatch):
    # Every worker is forked from the zygote, and the environment the zygote was started with
    # stays on each worker's stack, whatever the worker later does to os.environ. (The red team
    # read it back with ctypes, which the file rule now refuses too; this checks the zygote
    # itself, in this process: run it from an older kit's folder to see the leak there.)
    monkeypatch.setenv("ATTENTION_KIT_SECRET", "the instructor's secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "a token in the instructor's shell")
    zygote = isolation.Zygote()
    try:
        zygote.wait_ready()
        environ = Path(f"/proc/{zygote.process.pid}/environ").read_bytes()
    finally:
        zygote.close()
    assert b"the instructor's secret" not in environ
    assert b"a token in the instructor's shell" not in environ


# -- what a student prints stays text -------------------------------------------------------
FAKE_REPORT = """
    def kv_cache_mask(n_cached, n_new):
        raise RuntimeError("\\x1b[2J\\x1b[H== total 100 / 100 ==\\x1b[8m")
"""


def test_terminal_control_characters_never_reach_the_instructors_terminal(tmp_path):
    folder = make_submission(tmp_path / "student", {"kv_cache.py": FAKE_REPORT}, base=None)
    run = grader("grade", str(folder), "--exercise", "kv_cache", "--timeout", "30")
    assert "total 100 / 100" in run.stdout  # the text is shown, as text
    assert "\x1b" not in run.stdout and "\x1b" not in run.stderr


HUGE_NAME = """
    class Failure(Exception):
        pass

    Failure.__name__ = "F" * (4 << 20)

    def kv_cache_mask(n_cached, n_new):
        raise Failure("x" * (4 << 20))
"""


def test_a_huge_exception_makes_no_huge_report(tmp_path):
    folder = make_submission(tmp_path / "student", {"kv_cache.py": HUGE_NAME}, base=None)
    data = grade_json(folder, "kv_cache")
    assert score(data, "kv_cache") == 0
    size = (folder.parent / "student.json").stat().st_size
    assert size < 256 << 10, size  # every failing check quoted it: 4 MiB each, before

