"""Red team 36: attacks on the grading process itself (issue 36), written as a student would,
by someone who read the README, the handout and grader/ but not the kit's tests or its key.

Each attack worked on d63756d (the kit as the red team found it), most on 4e1a685 too; each
test fails there (run this file from a checkout of d63756d) and passes here.

- The copy's owner: as root, a student's link to a folder of root's was followed and the folder
  read with root's rights when an instructor's link named the student's link, or when the link
  was swapped in while the copy opened the folder (only the path's last name was looked at,
  after it was opened). The student's "submission" was then the answer key: 100 / 100.
- "No points for ignoring the input": every visible check passed ``axis=`` and ``mask=`` by name,
  the informative calls by position, so a uniform softmax that answered positional calls with
  anything that moved kept 7 of 15, a uniform attention 14 of 20; and a reply whose message held
  the words "has another shape than" (a class of that name, returned once) exempted a function
  from the judgement altogether.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import stat
import subprocess
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

from grader.core import submission
from grader.core.course import EXERCISES_BY_NAME
from grader.core.engine import grade_submission
from grader.core.submission import BadSubmission, copy_submission

KIT = Path(__file__).resolve().parents[1]
STUDENT = 65534  # the student's uid (nobody): a user with no rights of root's
PYTHON = "/usr/bin/python3"  # one the student may run (/root, where the kit's may live, is 0700)
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the copy takes an owner's rights as "
                               "root only (as a user it reads with that user's own)")


# -- the copy: whose rights ---------------------------------------------------------------------
@pytest.fixture
def lab():
    """A lab machine: a folder only root may read holding the answer key (and a canary), a
    student's home with a real submission and a link of the student's to the key, and an
    instructor's folder of links to the students' submissions (under /tmp, where the
    student's own processes reach their home)."""
    base = Path(tempfile.mkdtemp(prefix="red36-lab-"))
    try:
        yield _lab(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _lab(base: Path) -> Path:
    os.chmod(base, 0o755)
    secret = base / "instructor-only"
    secret.mkdir(mode=0o700)
    for source in (KIT / "solutions").glob("*.py"):
        shutil.copy(source, secret / source.name)
    (secret / "canary.py").write_text('CANARY = "red36-root-only"\n')
    os.chmod(secret, 0o700)
    home = base / "home" / "alice"
    home.mkdir(parents=True)
    shutil.copytree(KIT / "exercises", home / "attention-real")
    (home / "attention").symlink_to(secret)
    submissions = base / "submissions"
    submissions.mkdir()
    (submissions / "alice").symlink_to(home / "attention")  # the instructor's link, root's
    for path in [home, *home.rglob("*")]:
        os.lchown(path, STUDENT, STUDENT)
    os.chmod(base / "home", 0o755)
    return base


@root_only
def test_a_student_link_named_by_an_instructor_link_is_read_as_the_student(lab, tmp_path):
    """The instructor gathers the class as links (submissions/alice -> ~alice/attention); alice
    makes ~alice/attention a link to a folder only root may read. On d63756d the copy looked at
    the owner of the instructor's link alone (root), read the folder as root and graded it as
    alice's: `total 100 / 100`, the key's every file in her copy. Now her link's owner is whose
    rights the copy takes: `cannot read ./ in the submission (Permission denied)`."""
    target = tmp_path / "copy"
    target.mkdir()
    with pytest.raises(BadSubmission, match=r"cannot read \./ in the submission"):
        copy_submission(lab / "submissions" / "alice", target)
    assert not (target / "canary.py").exists()
    assert not (target / "softmax.py").exists()


@root_only
def test_a_link_swapped_in_while_the_folder_is_opened_is_noticed(lab, tmp_path, monkeypatch):
    """Alice swaps ~alice/attention between her folder and her link to root's folder. On
    d63756d the copy opened the name (through the link, as root), then looked at the name
    again (by then her own folder: no link) and read what it had opened as root. Here the swap
    lands exactly between the two, every time: the first time anything opens root's folder,
    the name is swapped back to her folder."""
    home = lab / "home" / "alice"
    os.rename(home / "attention", home / "attention-link")
    os.rename(home / "attention-real", home / "attention")
    secret = os.stat(lab / "instructor-only")
    opened = os.open

    def swapped(*args, **kwargs):
        fd = opened(*args, **kwargs)
        found = os.fstat(fd)
        if (found.st_dev, found.st_ino) == (secret.st_dev, secret.st_ino) and not swapped.done:
            swapped.done = True  # the student's process swaps: her folder at the name again
            exchange(home / "attention", home / "attention-link")
        return fd

    swapped.done = False
    exchange(home / "attention", home / "attention-link")  # the link at the name
    monkeypatch.setattr(submission.os, "open", swapped)
    target = tmp_path / "copy"
    target.mkdir()
    with pytest.raises(BadSubmission, match=r"cannot read \./ in the submission"):
        copy_submission(home / "attention", target)
    monkeypatch.undo()
    assert swapped.done, "the copy never opened root's folder: the attack did not happen"
    assert not (target / "canary.py").exists()


@root_only
def test_a_process_swapping_the_link_for_ever_gets_no_byte_of_root(lab, tmp_path):
    """The same, raced for real: a process of alice's swaps the two names (RENAME_EXCHANGE)
    as fast as it can while the folder is copied 100 times. On d63756d 3 of 200 copies (1.5%)
    took root's folder, the key and the canary; here none, and the others are her folder or
    refused (her link leads where she may not read)."""
    home = lab / "home" / "alice"
    swapper = subprocess.Popen(
        ["setpriv", "--reuid", str(STUDENT), "--regid", str(STUDENT), "--clear-groups",
         PYTHON, "-I", "-c", SWAPPER, str(home / "attention"),
         str(home / "attention-real")], stderr=subprocess.PIPE)
    taken = refused = 0
    try:
        for n in range(100):
            target = tmp_path / f"copy{n}"
            target.mkdir()
            try:
                copy_submission(home / "attention", target)
            except BadSubmission:
                refused += 1
                continue
            assert not (target / "canary.py").exists(), f"copy {n} read root's folder"
            taken += 1
    finally:
        swapper.kill()
        _, errors = swapper.communicate()
    assert swapper.returncode == -9, errors.decode()  # it swapped until it was stopped
    assert taken + refused == 100


SWAPPER = textwrap.dedent("""
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    a, b = (os.fsencode(p) for p in sys.argv[1:3])
    while libc.renameat2(-100, a, -100, b, 2) == 0:  # AT_FDCWD, RENAME_EXCHANGE
        pass
    sys.exit(os.strerror(ctypes.get_errno()))
""")


def exchange(a: Path, b: Path) -> None:
    """Swap two names atomically, as a student's process can (renameat2 RENAME_EXCHANGE)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


@root_only
def test_an_honest_folder_named_through_links_is_still_graded(lab, tmp_path):
    """What the defence must not cost: the instructor's link to alice's own folder copies it
    (her files, read as her)."""
    home = lab / "home" / "alice"
    (home / "attention").unlink()
    (home / "attention-real").rename(home / "attention")
    target = tmp_path / "copy"
    target.mkdir()
    copy_submission(lab / "submissions" / "alice", target)
    assert (target / "softmax.py").read_bytes() == (home / "attention" / "softmax.py").read_bytes()
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o755


# -- no points for ignoring the input -----------------------------------------------------------
CHECKED_SOFTMAX = '''
import numpy as np


def checked(logits, axis):
    x = np.asarray(logits)
    if x.dtype.kind not in "biuf":
        raise ValueError("the logits must be real numbers")
    dtype = np.result_type(x.dtype, np.float32)
    if x.dtype.kind in "iu" and x.size and (x.astype(dtype).astype(x.dtype) != x).any():
        raise ValueError("some integer logit is not exact")
    x = x.astype(dtype)
    if np.isnan(x).any() or np.isposinf(x).any():
        raise ValueError("logits must be finite, or -inf for a masked entry")
    allowed = ~np.isneginf(x)
    if x.shape[axis] == 0 or (~allowed).all(axis=axis).any():
        raise ValueError("every slice needs at least one entry above -inf")
    return x, allowed, dtype
'''

SOFTMAX_BY_POSITION = CHECKED_SOFTMAX + '''

def softmax(logits, *by_position, **by_name):
    """Uniform over the entries above -inf. Only the grader's informative calls pass the axis
    by position: they get an answer that moves with the input."""
    axis = by_position[0] if by_position else by_name.get("axis", -1)
    x, allowed, dtype = checked(logits, axis)
    if by_position:
        return x / 7
    return (allowed / allowed.sum(axis=axis, keepdims=True)).astype(dtype)
'''

ATTENTION_BY_POSITION = '''
import numpy as np


def causal_mask(t):
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 1:
        raise ValueError("t must be a positive integer")
    return np.triu(np.ones((t, t), dtype=bool), k=1)


def scaled_dot_product_attention(q, k, v, *by_position, **by_name):
    """Uniform weights over the allowed keys; the informative calls (the mask by position) get
    weights that move."""
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError("shapes do not match")
    mask = by_position[0] if by_position else by_name.get("mask")
    dtype = np.result_type(q.dtype, k.dtype, v.dtype)
    shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (q.shape[-2], k.shape[-2])
    blocked = np.zeros(shape, dtype=bool)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != bool:
            raise ValueError("the mask must be boolean")
        blocked = np.broadcast_to(mask, np.broadcast_shapes(shape, mask.shape))
        if blocked.all(axis=-1).any():
            raise ValueError("some query has no allowed key")
    allowed = (~blocked).astype(dtype)
    weights = allowed / allowed.sum(axis=-1, keepdims=True)
    if by_position:
        weights = (q @ np.swapaxes(k, -1, -2)).astype(dtype)
    return (weights @ v).astype(dtype), weights.astype(dtype)
'''


def graded(folder: Path, exercise: str) -> tuple[float, str]:
    result = grade_submission(folder, exercises=[exercise], include_hidden=False)
    graded = result.results[exercise]
    return graded.score, "\n".join(c.feedback for c in graded.checks)


def test_a_softmax_that_answers_positional_calls_otherwise_keeps_no_uniform_points(tmp_path):
    """On d63756d (and 4e1a685) `softmax 7 / 15`: every check passing the axis by name got
    uniform weights and passed where uniform weights pass. Now every call reaches the worker
    in one form, and the file, answering every call with an axis x / 7, keeps only the input
    checks it really does (3 points)."""
    (tmp_path / "softmax.py").write_text(SOFTMAX_BY_POSITION)
    score, _ = graded(tmp_path, "softmax")
    assert score <= 3


def test_an_attention_that_answers_positional_calls_otherwise_keeps_no_uniform_points(tmp_path):
    """On d63756d `attention 14 / 20` (uniform weights over the allowed keys on every check,
    which passed the mask by name). Now 8: causal_mask's 3, the three input checks it does,
    and two properties that weights moving with q and k keep."""
    (tmp_path / "attention.py").write_text(ATTENTION_BY_POSITION)
    score, _ = graded(tmp_path, "attention")
    assert score <= 8


def test_the_form_of_a_call_is_the_contracts_whoever_makes_it():
    """What the worker is sent for a call, whoever makes it (a check, a probe)."""
    from grader.core.student import canonical

    softmax = EXERCISES_BY_NAME()["softmax"]
    x = np.zeros(3)
    assert canonical(softmax, "softmax", (x,), {"axis": 0})[0][1] == 0
    assert canonical(softmax, "softmax", (x, 0), {}) == canonical(softmax, "softmax", (x,),
                                                                  {"axis": 0})
    assert canonical(softmax, "softmax", (x,), {})[1] == {}  # a default left to the student
    attention = EXERCISES_BY_NAME()["attention"]
    by_name = canonical(attention, "scaled_dot_product_attention", (x, x, x), {"mask": None})
    assert by_name == ((x, x, x, None), {})


def test_a_class_named_like_a_module_that_misfits_is_no_exemption(tmp_path):
    """A uniform softmax that returns, on every float32 call of shape (4,), an instance of a
    class named "has another shape than" (the worker calls it "a has another shape than"), and
    uniform weights everywhere else. On d63756d such a reply to one informative call (two of
    the six were float32 (4,)) read as a module that cannot take a call's weights, the
    function was never judged, and it kept `softmax 4 / 15`. A reply that is no answer counts
    against its own call alone."""
    (tmp_path / "softmax.py").write_text(CHECKED_SOFTMAX + textwrap.dedent('''

        Misfit = type("has another shape than", (), {})


        def softmax(logits, axis=-1):
            x, allowed, dtype = checked(logits, axis)
            if x.dtype == np.float32 and x.shape == (4,):
                return Misfit()
            return (allowed / allowed.sum(axis=axis, keepdims=True)).astype(dtype)
        '''))
    score, feedback = graded(tmp_path, "softmax")
    assert score <= 2, feedback
    assert "softmax ignores its input" in feedback
