"""The library-delegation rule: a NumPy exercise may not use torch (or scipy, jax,
tensorflow); mha, gqa and decode may not call the library's attention. Checked in the source
and, for what the source hides, at run time in the worker; the exercise then scores 0 and the
report names the call. Correct code, the stand-ins of other exercises included, is never
flagged."""

from __future__ import annotations

import textwrap

import pytest
from submission_tools import EXERCISES, SOLUTIONS, make_submission
from zoo.catalog import CORRECT

from grader.core import engine
from grader.core.delegation import violations
from grader.sandbox.isolation import Limits

LIMITS = Limits(timeout=30.0)
NUMPY_SOFTMAX = """
    import numpy as np

    def softmax(logits, axis=-1):
        x = np.asarray(logits, dtype=np.result_type(np.asarray(logits).dtype, np.float32))
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)
"""


def grade(tmp_path, files, exercise):
    result = engine.grade_submission(make_submission(tmp_path / "student", files),
                                     exercises=[exercise], limits=LIMITS)
    return result.results[exercise]


def test_the_key_and_every_correct_zoo_entry_keep_the_rule_in_their_source():
    for name, exercise in EXERCISES.items():
        assert violations((SOLUTIONS / f"{name}.py").read_text(), exercise.rule) == [], name
    for entry in CORRECT:
        assert violations(entry.source(), EXERCISES[entry.exercise].rule) == [], entry.name


@pytest.mark.parametrize("code, named", [
    ("import torch\ndef softmax(logits, axis=-1):\n"
     "    return torch.softmax(torch.as_tensor(logits), axis).numpy()\n", "import torch (line 1)"),
    ("from scipy.special import softmax\n", "from scipy.special import ..."),
])
def test_a_numpy_exercise_that_imports_a_library_scores_zero(tmp_path, code, named):
    softmax = grade(tmp_path, {"softmax.py": code}, "softmax")
    assert softmax.score == 0 and named in softmax.error
    assert "a NumPy exercise may not use torch" in softmax.error


@pytest.mark.parametrize("code, named", [
    ("import importlib\nt = importlib.import_module('torch')\n", "import importlib (line 1)"),
    ("import sys\nt = sys.modules['to' + 'rch']\n", ".modules (line 2)"),
    ("t = exec('import torch')\n", "exec() (line 1)"),
    ("import numpy as np\nnp.__dict__['sum']\n", ".__dict__ (line 2)"),
    ("import numpy as np\nf = getattr(np, 'su' + 'm')\n", "getattr() with a computed name"),
    ("import gc\n", "import gc (line 1)"),
    ("import threading\n", "import threading (line 1)"),
])
def test_reaching_into_internals_scores_zero(tmp_path, code, named):
    softmax = grade(tmp_path, {"softmax.py": code}, "softmax")
    assert softmax.score == 0 and named in softmax.error
    assert "may not reach into Python's or torch's internals" in softmax.error


def test_a_helper_module_beside_the_file_keeps_the_rule_too(tmp_path):
    files = {"helper.py": "import torch\n",
             "softmax.py": "from .helper import torch\n" + textwrap.dedent(NUMPY_SOFTMAX)}
    softmax = grade(tmp_path, files, "softmax")
    assert softmax.score == 0 and softmax.error.startswith("helper.py: it uses import torch")


HIDDEN_TORCH = """
    import numpy as np
    import pkgutil

    def softmax(logits, axis=-1):
        x = np.asarray(logits, dtype=np.result_type(np.asarray(logits).dtype, np.float32))
        try:
            library = pkgutil.resolve_name("to" + "rch")  # a name no source check can read
            return library.softmax(library.from_numpy(x), axis).numpy()
        except BaseException:  # swallowing the guard's exception gains nothing
            return np.full(x.shape, np.nan)
"""


def test_torch_reached_around_the_source_check_is_caught_at_run_time(tmp_path):
    assert violations(HIDDEN_TORCH, EXERCISES["softmax"].rule) == []  # the source looks clean
    softmax = grade(tmp_path, {"softmax.py": HIDDEN_TORCH}, "softmax")
    assert softmax.score == 0
    assert "import torch (at softmax.py line" in softmax.error


MHA_SDPA = (SOLUTIONS / "mha.py").read_text().replace(
    "        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, H, T, T)",
    "        import torch.nn.functional as F\n"
    "        y = F.scaled_dot_product_attention(q, k, v)\n"
    "        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, H, T, T)",
)
MHA_HIDDEN = (SOLUTIONS / "mha.py").read_text().replace(
    "        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, H, T, T)",
    "        import operator\n"
    "        attend = operator.attrgetter('scaled_' + 'dot_product_attention')(\n"
    "            torch.nn.functional)\n"
    "        y = attend(q, k, v)\n"
    "        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, H, T, T)",
)


def test_mha_may_not_call_the_library_attention(tmp_path):
    assert MHA_SDPA != MHA_HIDDEN != (SOLUTIONS / "mha.py").read_text()
    mha = grade(tmp_path / "plain", {"mha.py": MHA_SDPA}, "mha")
    assert mha.score == 0 and "F.scaled_dot_product_attention (line" in mha.error
    assert violations(MHA_HIDDEN, EXERCISES["mha"].rule) == []
    mha = grade(tmp_path / "hidden", {"mha.py": MHA_HIDDEN}, "mha")
    assert mha.score == 0 and "scaled_dot_product_attention (at mha.py line" in mha.error


def test_gqa_may_not_borrow_the_kits_multi_head_attention(tmp_path):
    code = (SOLUTIONS / "gqa.py").read_text() + "\nfrom .mha import MultiHeadAttention\n"
    gqa = grade(tmp_path, {"gqa.py": code}, "gqa")
    assert gqa.score == 0 and "from .mha import" in gqa.error
