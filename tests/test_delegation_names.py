"""The source rule admits what a file may name, it does not list what it may not: of each module
an exercise may import, the attributes of ``grader/core/delegation_names.py`` (written by
``tools/delegation_names.py`` from the installed libraries); of a value, every attribute but the
families that reach frames, code, raw memory or files. A module stands only where the rule can
follow it (at the head of a chain, as an alias, in ``hasattr``), and a file takes from the
submission's own modules what they define, never a module they import. The ways students
write keep passing (tests/test_delegation.py holds the key, the zoo and public code)."""

from __future__ import annotations

import importlib
import textwrap
from pathlib import Path

import numpy as np
import pytest
from submission_tools import EXERCISES, SOLUTIONS, make_submission

from grader.core import engine
from grader.core.delegation import (
    ATTENTION_RULE,
    HANDLE,
    INTERNALS,
    NAMES_WHY,
    NUMPY_RULE,
    OWN_WHY,
)
from grader.core.delegation_names import MODULES, NAMES, VERSIONS
from grader.core.delegation_verdicts import verdict, violations
from grader.sandbox.isolation import Limits
from tools import delegation_names

OWN = frozenset(EXERCISES) | {"helper"}


def code(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# -- the lists -----------------------------------------------------------------------------------
def test_the_lists_are_what_the_tool_writes_from_the_installed_libraries():
    if VERSIONS != delegation_names.versions():
        pytest.skip(f"the lists were written from {VERSIONS}, this is "
                    f"{delegation_names.versions()}: run make names")
    assert delegation_names.main(["--check"]) == 0


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_listed_name_is_there_to_name(module):
    found = importlib.import_module(module)
    assert [name for name in sorted(NAMES[module]) if not hasattr(found, name)] == []


# -- a module's attribute off its list: refused, named in full -----------------------------------
# Each runs a string as code, reads a file, or evaluates an annotation: each passed the rule
# while it was a list of forbidden names (none of these was on it), each is refused now.
STRING_RUNNERS = [
    ("import numpy as np\nnp.testing.runstring('import os', {})",
     "numpy.testing.runstring (line 2)"),
    ("import numpy as np\nt = np.testing\nelapsed = t.measure('import os')",
     "numpy.testing.measure (line 3)"),
    ("from numpy.testing import rundocs", "from numpy.testing import rundocs (line 1)"),
    ("import numpy\nm = numpy.bmat('a, b')", "numpy.bmat (line 2)"),  # its caller's globals
    ("import numpy as np\nx = np.lib.npyio.fromregex('/etc/passwd', '(.*)', [('a', 'S9')])",
     "numpy.lib.npyio.fromregex (line 2)"),
    ("import functools\n@functools.singledispatch\ndef f(x):\n    pass\n"
     "@f.register\ndef g(x: \"exec('import os') or int\"):\n    pass",
     "functools.singledispatch (line 2)"),
    ("import warnings\nline = warnings.formatwarning('', UserWarning, '/etc/hostname', 1)",
     "warnings.formatwarning (line 2)"),
    ("import torch.nn.functional as F\nj = F.torch.jit", "torch.nn.functional.torch.jit (line 2)"),
    ("from torch import nn\nf = nn.modules.module.__builtins__",
     "torch.nn.modules.module.__builtins__ (line 2)"),
    ("import torch\ntorch.set_default_dtype(torch.float64)", "torch.set_default_dtype (line 2)"),
]


@pytest.mark.parametrize("source, named", STRING_RUNNERS, ids=[n for _, n in STRING_RUNNERS])
def test_a_module_attribute_off_its_list_is_refused_with_its_dotted_name(source, named):
    rule = ATTENTION_RULE if "torch" in source else NUMPY_RULE
    assert violations(source + "\n", rule, OWN) == [named]
    assert verdict(source + "\n", rule, OWN) == f"it uses {named}, and {NAMES_WHY}"


def test_runstring_does_run_a_string():
    """Why it is refused: an allowed module's function that compiles what it is given."""
    names: dict[str, object] = {}
    np.testing.runstring("x = 6 * 7", names)
    assert names["x"] == 42


def test_a_chain_is_named_by_the_modules_it_reaches_not_by_its_aliases():
    source = code('''
        import numpy
        from numpy import testing as checks
        import torch.nn.functional as F
        G = F
        def later():
            return H.anything
        H = checks
        checks.tempdir()
        G.scaled_mm_v2_internal_name
    ''')
    assert violations(source, ATTENTION_RULE) == [
        "numpy.testing.anything (line 6)", "numpy.testing.tempdir (line 8)",
        "torch.nn.functional.scaled_mm_v2_internal_name (line 9)"]


# -- a value's attributes: refused by family -----------------------------------------------------
VALUES = [
    ("import numpy as np\np = np.zeros(3).ctypes", ".ctypes (line 2)"),
    ("import numpy as np\nx = np.zeros(3)\nx.tofile('/tmp/x')", ".tofile (line 3)"),
    ("import numpy as np\nnp.zeros(3).dump('/tmp/x')", ".dump (line 2)"),
    ("import numpy as np\nc = np.random.default_rng(0).bit_generator.cffi", ".cffi (line 2)"),
    ("import torch\ns = torch.zeros(3).untyped_storage()", ".untyped_storage (line 2)"),
    ("import torch\na = torch.zeros(3).data_ptr()", ".data_ptr (line 2)"),
    ("import torch\nv = torch.zeros(3).as_strided((9,), (1,))", ".as_strided (line 2)"),
    ("import torch\nm = torch.nn.Linear(2, 2)\nm.compile()", ".compile (line 3)"),
    ("def f():\n    yield\ng = f()\ncode = g.gi_code", ".gi_code (line 4)"),
    ("def f(frame):\n    return frame.f_back", ".f_back (line 2)"),
    ("def f(tb):\n    return tb.tb_frame", ".tb_frame (line 2)"),
    ("def f(c):\n    return c.co_consts", ".co_consts (line 2)"),
    ("def f(x):\n    return x.__globals__", ".__globals__ (line 2)"),
]


@pytest.mark.parametrize("source, named", VALUES, ids=[n for _, n in VALUES])
def test_a_values_attribute_of_a_refused_family_is_refused(source, named):
    rule = ATTENTION_RULE if "torch" in source else NUMPY_RULE
    assert violations(source + "\n", rule, OWN) == [named]
    assert verdict(source + "\n", rule, OWN).endswith(f", and {INTERNALS}")


# -- a module stands only where the rule can follow it -------------------------------------------
HANDED = [
    ("import numpy as np\npair = (np, 1)", "np (line 2)"),
    ("import torch\nclass Holder:\n    F = torch.nn.functional", "torch.nn.functional (line 3)"),
    ("class Holder:\n    import numpy as np", "import numpy as np (line 2)"),
    ("import numpy as np\nf = lambda m=np.testing: m", "np.testing (line 2)"),
    ("import numpy as np\ndef f(x):\n    x.np = np", "np (line 3)"),
    ("import helper\ndef f(g):\n    return g(helper)", "helper (line 3)"),
    ("from torch.nn import functional\nmatch functional:\n    case _:\n        pass",
     "functional (line 2)"),
]


@pytest.mark.parametrize("source, named", HANDED, ids=[n for _, n in HANDED])
def test_a_module_handed_around_is_refused(source, named):
    rule = ATTENTION_RULE if "torch" in source else NUMPY_RULE
    found = verdict(source + "\n", rule, OWN)
    assert found is not None and f"{named}, and {HANDLE}" in found


# -- the ways students write ---------------------------------------------------------------------
STYLES = {
    "aliases, hasattr, version, submodules imported in full": '''
        import numpy as np
        import numpy.linalg as la
        import torch
        import torch.nn as nn
        from torch.nn import functional as F
        from numpy.typing import NDArray

        G = F
        FUSED = hasattr(torch.nn.functional, "scaled_dot_product_attention")
        OLD = torch.__version__ < "2"

        def norm(x: NDArray[np.float64]) -> float:
            return float(la.norm(x[:, np.newaxis].T))

        def act(x):
            return G.gelu(nn.functional.relu(x))
    ''',
    "a module of its own: buffers, no_grad, init, private names, super": '''
        import math
        import torch
        from torch import nn

        class Attention(nn.Module):
            def __init__(self, d: int):
                super().__init__()
                self._proj = nn.Linear(d, d, bias=False)
                nn.init.xavier_uniform_(self._proj.weight)
                self.register_buffer("tri", torch.ones(4, 4, dtype=torch.bool).triu(1))
                self._cache = None

            def forward(self, x):
                if not isinstance(x, torch.Tensor):
                    raise ValueError(f"{type(x).__name__}: not a tensor")
                with torch.no_grad():
                    self._cache = x.detach().clone()
                s = torch.einsum("bqd,bkd->bqk", self._proj(x), x) / math.sqrt(x.shape[-1])
                return torch.softmax(s.masked_fill(self.tri[:4, :4], -torch.inf), dim=-1)
    ''',
    "a custom autograd function, seeded randomness, asserts in a main block": '''
        import torch

        class Square(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return 2 * x * grad

        if __name__ == "__main__":
            torch.manual_seed(0)
            device = "cuda" if torch.cuda.is_available() else (
                "mps" if torch.backends.mps.is_available() else "cpu")
            x = torch.randn(3, dtype=torch.float64, requires_grad=True, device=device)
            torch.testing.assert_close(Square.apply(x), x ** 2)
            assert torch.autograd.gradcheck(Square.apply, (x,))
            w = torch.nn.Parameter(torch.ones(3))
            step = torch.optim.SGD([w], lr=0.1)
            Square.apply(w).sum().backward()
            step.step()
    ''',
    "own attributes named like a family's (f_proj, co_attn, a write pointer)": '''
        import numpy as np

        class Cache:
            def __init__(self):
                self.f_proj, self.co_attn, self.ptr, self.write_ptr = 1.0, 2.0, 0, 0

            def advance(self, x):
                self.ptr += len(x)
                self.write_ptr = self.ptr
                return np.asarray(x) * self.f_proj + self.co_attn
    ''',
    "functools, comprehensions, lambdas, dtypes, errors": '''
        import functools
        import numpy as np

        def chain(*fs):
            return functools.reduce(lambda f, g: lambda x: g(f(x)), fs)

        def softmax(x, axis=-1):
            x = np.asarray(x, dtype=np.float64)
            if x.ndim == 0:
                raise ValueError("a scalar has no axis")
            e = np.exp(x - x.max(axis=axis, keepdims=True))
            rows = [row / row.sum() for row in np.moveaxis(e, axis, -1).reshape(-1, x.shape[axis])]
            with np.errstate(over="ignore"):
                return np.moveaxis(np.stack(rows).reshape(np.moveaxis(e, axis, -1).shape), -1, axis)

        rng = np.random.default_rng(0)
        sample = rng.standard_normal((2, 3)).astype(np.float32)
    ''',
}


@pytest.mark.parametrize("source", STYLES.values(), ids=STYLES.keys())
def test_the_ways_students_write_pass(source):
    rule = ATTENTION_RULE if "torch" in source else NUMPY_RULE
    assert violations(code(source), rule, OWN) == []


# -- what a file takes from the submission's own modules -----------------------------------------
LIMITS = Limits(timeout=30.0)
HELPER = ("import numpy as np\nimport numpy.testing as checks\n\n"
          "def stable(x):\n    return x - x.max()\n")


def grade(tmp_path, files):
    result = engine.grade_submission(make_submission(tmp_path / "student", files),
                                     exercises=["softmax"], limits=LIMITS)
    return result.results["softmax"]


@pytest.mark.parametrize("taking, named", [
    ("from .helper import checks\nchecks.runstring('import os', {})\n",
     "from .helper import checks (line 1)"),
    ("import helper\nhelper.checks.runstring('import os', {})\n", "helper.checks (line 2)"),
], ids=["from-import", "attribute"])
def test_a_module_taken_from_an_own_module_is_refused(tmp_path, taking, named):
    """Each file is read on its own: what ``helper`` binds to a module, no rule of the file
    that takes it would see. The reader says which names each file binds to a module and
    which it takes from the others; the grading process compares them."""
    assert violations(taking, NUMPY_RULE, OWN) == []  # on its own, nothing to see
    key = (SOLUTIONS / "softmax.py").read_text()
    softmax = grade(tmp_path, {"helper.py": HELPER, "softmax.py": taking + key})
    assert softmax.score == 0 and softmax.error == f"it uses {named}, and {OWN_WHY}"


def test_an_own_modules_names_are_taken_by_name_never_all_at_once():
    """``from .helper import *`` would take its modules unnamed, out of the view's sight."""
    for star in ("from .helper import *", "from helper import *"):
        assert violations(star + "\n", NUMPY_RULE, OWN) == [f"{star} (line 1)"]


def test_what_an_own_module_defines_is_taken_freely(tmp_path):
    key = (SOLUTIONS / "softmax.py").read_text()
    softmax = grade(tmp_path, {"helper.py": HELPER, "softmax.py": (
        "import helper\nfrom .helper import stable\nshift = helper.stable\n" + key)})
    assert softmax.score == softmax.max_score, softmax.error


# -- found by the red team on the allow-list rule (tests/attacks/, student files) ----------------
RED_TEAM = Path(__file__).resolve().parent / "attacks"


@pytest.mark.parametrize("attack, named", [
    # hasattr(np, "f2py") made NumPy's lazy loader import subprocess and ctypes in the worker
    ("hasattr-lazy-import", "numpy.ctypeslib (line 5); numpy.f2py (line 5)"),
    # a format string built at run time read __globals__ and the builtins by name
    ("format-attr-leak", "text.format(...) of a string built at run time (line 15)"),
])
def test_what_the_red_team_found_past_the_allow_list_is_refused(attack, named):
    source = (RED_TEAM / attack / "softmax.py").read_text()
    found = violations(source, NUMPY_RULE, OWN)
    assert any(named in v for v in found) or named in "; ".join(found), found


@pytest.mark.parametrize("source, refused", [
    ('import numpy as np\nok = hasattr(np, "f2py")\n', True),
    ('import numpy as np\nname = "exp"\nok = hasattr(np, name)\n', True),
    ('import numpy as np\nok = hasattr(np, "exp") and hasattr(np, "linalg")\n', False),
    ('import torch.nn.functional as F\nok = hasattr(F, "scaled_dot_product_attention")\n', False),
    ('class A:\n    pass\n\nok = hasattr(A(), "w")\n', False),
    ('s = "{0.x}".format(1) + f"{1:.2f}" + "{} {}".format(1, 2)\n', False),
    ('s = "{}"\nt = s.format(1)\n', True),
    ('s = ("{0." + "x}").format(1)\n', True),
])
def test_hasattr_of_a_module_and_format_strings_are_held_to_the_rule(source, refused):
    rule = ATTENTION_RULE if "torch" in source else NUMPY_RULE
    assert bool(violations(source, rule, OWN)) == refused
