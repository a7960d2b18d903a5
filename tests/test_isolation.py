"""A crash, exit, segfault, hang or memory blow-up costs its own exercise and nothing else."""

from __future__ import annotations

from submission_tools import make_submission, rule_off

from grader.core import engine
from grader.sandbox.isolation import GiB, Limits

HOSTILE = {
    "softmax_backward.py": """
        import os

        def softmax_backward(probs, grad, axis=-1):
            os._exit(3)
    """,
    "attention.py": """
        import os
        import signal

        def causal_mask(n):
            os.kill(os.getpid(), signal.SIGSEGV)

        def scaled_dot_product_attention(q, k, v, mask=None):
            os.kill(os.getpid(), signal.SIGSEGV)
    """,
    "heads.py": """
        def split_heads(x, n_head):
            while True:
                pass

        def merge_heads(x):
            while True:
                pass
    """,
    "mha.py": """
        import numpy as np
        import torch

        class MultiHeadAttention(torch.nn.Module):
            def __init__(self, d_model, n_head, bias=True):
                super().__init__()
                hoard = []
                while True:  # 64 MiB at a time, touched, until the limit says no
                    hoard.append(np.ones(8 << 20))
    """,
    "kv_cache.py": """
        import sys

        sys.exit("I give up")
    """,
}
LIMITS = Limits(timeout=8.0, memory=1 * GiB, call=0)  # the exercise-wide limit (no per call)


def test_one_broken_exercise_costs_only_itself(tmp_path, monkeypatch):
    rule_off(monkeypatch)  # the crashes themselves are tested, not the rule that refuses them
    result = engine.grade_submission(make_submission(tmp_path / "student", HOSTILE), limits=LIMITS)
    scores = {name: e.score for name, e in result.exercises.items()}
    errors = {name: e.error or "" for name, e in result.exercises.items()}
    assert scores["softmax"] == result.exercises["softmax"].max_score == 15
    assert scores == {**{name: 0 for name in scores}, "softmax": 15}
    assert "exit code 3" in errors["softmax_backward"]
    assert "SIGSEGV" in errors["attention"]
    assert "stopped after 8 s" in errors["heads"]
    assert "out of memory" in errors["mha"]
    assert "sys.exit('I give up')" in errors["kv_cache"]
    assert all(errors[name] for name in scores if name != "softmax"), errors
