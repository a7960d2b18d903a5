"""Out of reach by construction: the red team's attacks, as students who read the handout's
grader wrote them (``tests/attacks/<attack>/``: student files only), each measured to score
on the kit before this redesign (commit 1740e78: 100/100 core with no code of one's own,
mha 25/25 from torch's own attention, the key's mha.py and softmax.py printed byte for byte,
all ten hidden softmax inputs printed, flash 10/10 while building the (T, T) matrix).

A second red team, given the redesigned kit's handout and README, found six more (the ``-a``
attacks pass the old rule through a ``match`` class pattern; ``-b`` are the same past the
rule): SciPy in the base interpreter's site-packages, flash's matrix built in a forked child,
mha recreated from torch's source, and the grading process made to build a 14 GB module.

Each scores 0 on its exercise twice over: with the source rule, which refuses it and names the
line; and with the rule switched off (``engine._verdict`` patched to pass every file, as if a
student had found a way past it) and the worker's audit hook with it (``tests/test_audit_hook.py``
tests the hook on its own), where what holds is outside the student's process: the worker's
files and memory (no torch in a NumPy worker, no key anywhere), torch's dispatcher, the
kernel's account of memory, and a worker of their own for the hidden checks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from submission_tools import CORE, KIT, SOLUTIONS, rule_off

from grader.core import engine
from grader.integrations.outputs import report
from grader.sandbox.isolation import FORBIDDEN

ATTACKS = Path(__file__).resolve().parent / "attacks"
# The exercises each attack is after, and what it took on the old kit.
TARGETS = {
    "torch-back": {name: None for name in CORE},
    "mha-by-library": {"mha": None},
    "read-the-key": {"attention": None, "decode": None},
    "hidden-inputs": {"softmax": None},
    "flash-mmap": {"flash": None},
    "scipy-match-a": {"softmax": None},
    "flash-fork-a": {"flash": None},
    "mha-reload-a": {"mha": None},
}
# Lines of the key that no stub or handout holds: none may reach a report.
KEY_LINES = sorted({
    line.strip() for name in ("softmax", "mha", "kv_cache", "softmax_backward")
    for line in (SOLUTIONS / f"{name}.py").read_text().splitlines()
    if len(line.strip()) > 30 and line.strip() not in (KIT / "exercises" / f"{name}.py").read_text()
})


def graded(folder: Path, monkeypatch: pytest.MonkeyPatch | None = None):
    if monkeypatch is not None:  # the rule switched off (every file passes it), and the hook
        rule_off(monkeypatch)
    return engine.grade_submission(folder, limits=engine.Limits(timeout=60))


def text_of(result) -> str:
    return json.dumps(report.to_json(result)) + report.render(result)


def assert_no_key_text(text: str) -> None:
    leaked = [line for line in KEY_LINES if line in text]
    assert not leaked, leaked[:3]


@pytest.mark.parametrize("attack", sorted(TARGETS))
def test_each_attack_is_refused_by_the_rule_with_its_line(attack):
    result = graded(ATTACKS / attack)
    for exercise in TARGETS[attack]:
        outcome = result.results[exercise]
        assert outcome.score == 0, (exercise, outcome.error)
        assert "it uses" in outcome.error and "(line " in outcome.error, outcome.error
    assert_no_key_text(text_of(result))


def test_past_the_rule_torch_is_nowhere_in_a_numpy_worker(monkeypatch):
    # torch-back's helper walks gc.get_objects() for torch's modules: the NumPy zygote never
    # imported torch, so there are none; below-the-rule's softmax imports it by name, then
    # looks for torch's folder on its path.
    result = graded(ATTACKS / "torch-back", monkeypatch)
    for exercise in ("softmax", "softmax_backward", "attention", "heads", "kv_cache"):
        assert result.results[exercise].score == 0
        assert "KeyError: 'torch'" in result.results[exercise].error
    softmax = graded(ATTACKS / "below-the-rule", monkeypatch).results["softmax"]
    assert softmax.score == 0
    # no module, and no torch folder in any site-packages of its root
    assert "No module named 'torch'); torch folders {}" in softmax.checks[0].feedback
    # scipy-base-b adds the base interpreter's site-packages to its path: in a NumPy worker's
    # root every site-packages folder holds NumPy alone.
    softmax = graded(ATTACKS / "scipy-base-b", monkeypatch).results["softmax"]
    assert softmax.score == 0 and "No module named 'scipy'" in softmax.error


@pytest.mark.parametrize("attack", ["mha-by-library", "below-the-rule"])
def test_past_the_rule_torch_attention_ends_the_worker_at_the_dispatcher(attack, monkeypatch):
    # F.multi_head_attention_forward under DisableTorchFunction; aten's SDPA called directly.
    mha = graded(ATTACKS / attack, monkeypatch).results["mha"]
    assert mha.score == 0 and mha.error == FORBIDDEN


@pytest.mark.parametrize("attack, exercise", [("read-the-key", "attention"),
                                              ("read-the-key", "decode"),
                                              ("key-anywhere", "attention")])
def test_past_the_rule_no_line_of_the_key_is_in_a_worker(attack, exercise, monkeypatch):
    # read-the-key walks the frames of the worker's load for the siblings' sources;
    # key-anywhere searches every string on the heap, every frame and every file it can open.
    result = graded(ATTACKS / attack, monkeypatch)
    assert result.results[exercise].score == 0
    assert_no_key_text(text_of(result))
    if attack == "key-anywhere":
        assert "found 0: " in result.results[exercise].checks[0].feedback


def test_past_the_rule_hidden_inputs_stay_hidden(monkeypatch):
    # hidden-inputs exits in the middle of the hidden check of the old layout, where the
    # visible checks ran first in the same worker: here its trigger never fires, and it is the
    # honest softmax it also is. hidden-any-worker finds the hidden check's own worker and
    # exits there with the inputs: a fixed sentence on the hidden check is all any report
    # says, and the visible checks, graded before, keep the honest softmax's points.
    softmax = graded(ATTACKS / "hidden-inputs", monkeypatch).results["softmax"]
    assert softmax.score == 15 and "sys.exit" not in softmax.output
    result = graded(ATTACKS / "hidden-any-worker", monkeypatch)
    softmax = result.results["softmax"]
    hidden = [c for c in softmax.checks if c.hidden]
    assert softmax.error is None and hidden
    assert softmax.score == sum(c.points for c in softmax.checks if not c.hidden) >= 12
    assert "LEAK" not in text_of(result)
    assert all(c.feedback == f"Property: {c.prop}\nNot graded: {engine.HIDDEN_LOST}"
               for c in hidden)


@pytest.mark.parametrize("attack", ["flash-mmap", "below-the-rule", "flash-fork-b"])
def test_past_the_rule_the_kernel_counts_flash_memory(attack, monkeypatch):
    # An mmap buffer, the kernel's peak reset through /proc/self/clear_refs, or the matrix
    # built in a forked child: the grading process reads the worker's peak from the kernel,
    # the worker cannot reset it, and a measured worker can start no other process (its fork
    # failed, BlockingIOError, before the seccomp filter refused the pipe it opens first).
    flash = graded(ATTACKS / attack, monkeypatch).results["flash"]
    memory = next(c for c in flash.checks
                  if c.name == "test_peak_memory_far_below_one_score_matrix")
    assert not memory.passed, memory.feedback
    why = "PermissionError" if attack == "flash-fork-b" else "allocated at least"  # no pipe
    assert why in memory.feedback, memory.feedback
    assert flash.score <= flash.max_score - memory.max_points


def test_past_the_rule_the_seal_on_clear_refs_cannot_be_lifted(monkeypatch):
    # seal-lift unmounts the file laid over /proc/self/clear_refs before it resets its peak:
    # as another user than root the worker held every capability of its user namespace, and
    # flash scored its memory check while building the (T, T) matrix (on 4e1a685, as uid 65534).
    flash = graded(ATTACKS / "seal-lift", monkeypatch).results["flash"]
    memory = next(c for c in flash.checks
                  if c.name == "test_peak_memory_far_below_one_score_matrix")
    assert not memory.passed and "allocated at least" in memory.feedback, memory.feedback


def test_past_the_rule_a_worker_cannot_write_into_the_graders_interpreter(monkeypatch):
    # venv-writable remounts its read-only view writable and plants a .pth file in every
    # site-packages folder: as uid 65534 on 4e1a685 it landed in that user's own virtual
    # environment, and every later Python start (the grader's) ran its line.
    sites = sorted({p for p in sys.path if p.endswith(("site-packages", "dist-packages"))})
    planted = [Path(site) / "attention-kit-planted.pth" for site in sites]
    try:
        mha = graded(ATTACKS / "venv-writable", monkeypatch).results["mha"]
        assert mha.score == 0
        assert "planted in" not in mha.output and "refused: OSError" in mha.output, mha.output
        assert [p for p in planted if p.exists()] == []
    finally:
        for path in planted:
            path.unlink(missing_ok=True)


def test_past_the_rule_a_worker_cannot_write_to_the_graders_terminal(monkeypatch):
    # terminal writes an escape sequence and a forged report line to every /dev/pts/N it can
    # open: the terminal of the user grading is that user's, and as that user on 4e1a685 the
    # worker opened it (here a pseudo-terminal this test holds, as an instructor's shell would).
    master, slave = os.openpty()
    try:
        softmax = graded(ATTACKS / "terminal", monkeypatch).results["softmax"]
        os.set_blocking(master, False)
        try:
            seen = os.read(master, 65536)
        except BlockingIOError:
            seen = b""
        assert b"ATTENTION-KIT-TERMINAL" not in seen and "wrote to" not in softmax.output, seen
    finally:
        os.close(master)
        os.close(slave)


def test_a_proxy_question_too_big_costs_its_exercise_not_the_run():
    # decode-proxy-oom-a asks the key's MultiHeadAttention(30000, 1): four 3.6 GB layers. It
    # is built in a trusted worker under the student's limits, never in the grading process.
    result = engine.grade_submission(ATTACKS / "decode-proxy-oom-a", exercises=["decode"],
                                     limits=engine.Limits(timeout=60, memory=1 << 30))
    decode = result.results["decode"]
    assert decode.score == 0 and "could not be imported" in decode.error


def test_past_the_rule_torch_source_is_the_limit(monkeypatch):
    # A torch worker can read torch's Python source, and exec of multi_head_attention_forward's
    # text makes a copy the kit never replaced, built of ordinary operators. Only the source
    # rule (it refuses mha-reload-a: test_each_attack_is_refused_by_the_rule_with_its_line) and
    # the audit hook (it refuses the open: test_audit_hook) stand in the way.
    mha = graded(ATTACKS / "mha-reload-b", monkeypatch).results["mha"]
    assert mha.score == mha.max_score


def test_a_proxy_answers_with_the_key_and_its_errors(tmp_path):
    # What an honest attention gets from `from .softmax import softmax`: the key's result, and
    # the key's ValueError for logits it refuses.
    folder = tmp_path / "student"
    folder.mkdir()
    (folder / "attention.py").write_text(
        "import numpy as np\nfrom .softmax import softmax\n\n"
        "def causal_mask(t):\n    return softmax(np.array([[1.0, np.nan]]))\n\n"
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        "    raise ValueError(repr(softmax(np.array([0.0, 0.0]))))\n")
    checks = engine.grade_submission(folder, exercises=["attention"]).results["attention"].checks
    feedback = "\n".join(c.feedback for c in checks)
    assert "your code raised ValueError: array([0.5, 0.5])" in feedback
    assert "raised ValueError: logits must be finite" in feedback


# -- every route ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def class_of_attackers(tmp_path_factory):
    """The attacks as one class, graded by ``batch`` in a process of its own."""
    tmp = tmp_path_factory.mktemp("attackers")
    for attack in TARGETS:
        shutil.copytree(ATTACKS / attack, tmp / "class" / attack)
    run = subprocess.run(
        [sys.executable, "-m", "grader", "batch", str(tmp / "class"), "--csv",
         str(tmp / "grades.csv"), "--json-dir", str(tmp / "results"), "--jobs", "2",
         "--report", str(tmp / "report")], cwd=tmp, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr
    return tmp


def test_batch_gives_every_attack_nothing_and_prints_no_key(class_of_attackers):
    for attack, exercises in TARGETS.items():
        data = json.loads((class_of_attackers / "results" / f"{attack}.json").read_text())
        scores = {**data["extra_data"]["exercises"], **data["extra_data"]["bonus"]}
        assert all(scores[name]["score"] == 0 for name in exercises), (attack, scores)
    everything = "".join(p.read_text() for p in class_of_attackers.rglob("*")
                         if p.is_file() and p.suffix in (".json", ".csv", ".md", ".html"))
    assert_no_key_text(everything)


@pytest.mark.parametrize("attack", ["torch-back", "read-the-key"])
def test_gradescope_gives_the_attack_nothing_and_prints_no_key(tmp_path, attack):
    root = tmp_path / "autograder"
    shutil.copytree(ATTACKS / attack, root / "submission")
    shutil.copytree(SOLUTIONS, root / "source" / "solutions")
    shutil.copyfile(KIT / "course.toml", root / "source" / "course.toml")
    run = subprocess.run([sys.executable, "-m", "grader", "gradescope", "run", "--root",
                          str(root)], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    scores = {**results["extra_data"]["exercises"], **results["extra_data"]["bonus"]}
    assert all(scores[name]["score"] == 0 for name in TARGETS[attack]), scores
    assert_no_key_text(json.dumps(results))


def test_decode_cannot_have_the_key_run_the_attention_it_is_to_compute():
    """A red team's decode_step kept every token and asked the core MultiHeadAttention, a proxy
    the key answers, for the whole causal forward at each step: 10/10 on the old kit. decode may
    build the module (its layers are what it works with), never run its forward."""
    decode = graded(ATTACKS / "decode-by-proxy").results["decode"]
    failing = {c.name: c.feedback for c in decode.checks if not c.passed}
    assert "test_token_by_token_equals_full_causal_forward" in failing
    assert decode.score <= 3  # the KVCache checks: its own work
    assert "mha.MultiHeadAttention.forward is not something the file may use" in failing[
        "test_token_by_token_equals_full_causal_forward"]
