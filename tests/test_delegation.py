"""The source rule, an allow-list over every file of a submission: the modules an exercise may
import, no underscore names but the file's own, no lookups by a string, no escape hatches of
the allowed modules, no patching of another module, and no library attention in the attention
exercises. Honest code passes unchanged: the answer key, the bug zoo, and code built the way
nanoGPT, minGPT, the Annotated Transformer and a CS336 solution build their attention. A file
that breaks the rule scores 0 and the report names the line."""

from __future__ import annotations

import textwrap
from dataclasses import replace

import pytest
from submission_tools import EXERCISES, SOLUTIONS, make_submission
from zoo.catalog import CORRECT, WRONG

from grader.core import engine
from grader.core.delegation import (
    ATTENTION_RULE,
    INTERNALS,
    NUMPY_RULE,
    PATCH,
    Rule,
)
from grader.core.delegation_verdicts import verdict, violations
from grader.sandbox.isolation import Limits

LIMITS = Limits(timeout=30.0)
GQA_RULE = replace(ATTENTION_RULE, siblings=("mha",))
README_MESSAGE = ("it uses import torch (line 1), and a NumPy exercise may not use torch, "
                  "scipy, jax or tensorflow")


def own(rule: Rule, *helpers: str) -> frozenset[str]:
    """What a grader passes: every exercise's name and the submission's helper modules, less
    the exercises the rule keeps out."""
    return frozenset(EXERCISES) | set(helpers) - set(rule.siblings)


def code(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# -- honest code passes unchanged ----------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_every_answer_key_file_keeps_its_exercises_rule(name):
    rule = EXERCISES[name].rule
    assert violations((SOLUTIONS / f"{name}.py").read_text(), rule, own(rule)) == []


@pytest.mark.parametrize("entry", CORRECT, ids=lambda e: e.name)
def test_every_correct_zoo_entry_keeps_the_rule(entry):
    rule = EXERCISES[entry.exercise].rule
    assert violations(entry.source(), rule, own(rule)) == []


@pytest.mark.parametrize("entry", WRONG, ids=lambda e: e.name)
def test_a_wrong_zoo_entry_keeps_the_rule_unless_it_uses_a_banned_library(entry):
    """Wrong entries are honest students with a bug: the rule lets them be graded. The one
    that does a NumPy exercise in torch gets the library message, and nothing else."""
    rule = EXERCISES[entry.exercise].rule
    found = verdict(entry.source(), rule, own(rule))
    if "import torch" in entry.source() and rule is NUMPY_RULE:
        assert found is not None and found.startswith("it uses import torch (line ")
        assert found.endswith("and a NumPy exercise may not use torch, scipy, jax or tensorflow")
    else:
        assert found is None


# The constructs of real public implementations, written here in the kit's own words: each
# block uses what one of them uses (its imports, module layout, buffers, initialisation and
# the calls its attention makes), checked as the torch exercises' files. The real files
# (nanoGPT's and minGPT's model.py, the Annotated Transformer's attention, a CS336 assignment 1
# solution) were read against the rule when it was written: their attention passes unchanged.
NANOGPT = code('''
    import math
    from dataclasses import dataclass

    import torch
    import torch.nn as nn
    from torch.nn import functional as F

    class Norm(nn.Module):
        def __init__(self, width, bias):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(width))
            self.bias = nn.Parameter(torch.zeros(width)) if bias else None

        def forward(self, input):
            return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)

    class SelfAttention(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            assert cfg.width % cfg.heads == 0
            self.qkv = nn.Linear(cfg.width, 3 * cfg.width, bias=cfg.bias)
            self.out = nn.Linear(cfg.width, cfg.width, bias=cfg.bias)
            self.drop = nn.Dropout(cfg.dropout)
            self.heads, self.width = cfg.heads, cfg.width
            self.fused = hasattr(torch.nn.functional, 'scaled_dot_product_attention')
            if not self.fused:
                print("no fused attention here")
            self.register_buffer("causal", torch.tril(torch.ones(cfg.context, cfg.context))
                                 .view(1, 1, cfg.context, cfg.context))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.qkv(x).split(self.width, dim=2)
            q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)  # (B, H, T, D)
            k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
            v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.causal[:,:,:T,:T] == 0, float('-inf'))
            att = self.drop(F.softmax(att, dim=-1))
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            return self.out(y)

    @dataclass
    class Config:
        context: int = 256
        heads: int = 4
        width: int = 64
        dropout: float = 0.0
        bias: bool = False
''')
NANOGPT_FLASH = NANOGPT.replace(
    "        att = (q @ k.transpose(-2, -1))",
    "        if self.fused:\n"
    "            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)\n"
    "        att = (q @ k.transpose(-2, -1))")
MINGPT = code('''
    import math

    import torch
    import torch.nn as nn
    from torch.nn import functional as F

    from mingpt.utils import CfgNode as CN

    class TanhGELU(nn.Module):
        def forward(self, x):
            inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
            return 0.5 * x * (1.0 + torch.tanh(inner))

    class Model(nn.Module):
        @staticmethod
        def defaults():
            cfg = CN()
            cfg.layers = 2
            return cfg

        def __init__(self, cfg):
            super().__init__()
            self.body = nn.ModuleDict(dict(
                blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(cfg.layers)]),
            ))
            self.apply(self._reset)
            for name, param in self.named_parameters():
                if name.endswith('.weight'):
                    torch.nn.init.normal_(param, mean=0.0, std=0.02 / math.sqrt(2 * cfg.layers))

        def _reset(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)

        def forward(self, x):
            return F.gelu(self.body.blocks[0](x))
''')
ANNOTATED = code('''
    import copy
    import math

    import torch
    import torch.nn as nn

    def copies(layer, n):
        return nn.ModuleList([copy.deepcopy(layer) for _ in range(n)])

    def no_peeking(size):
        upper = torch.triu(torch.ones((1, size, size)), diagonal=1).type(torch.uint8)
        return upper == 0

    def attend(query, key, value, mask=None, dropout=None):
        width = query.size(-1)
        scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(width)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        weights = scores.softmax(dim=-1)
        if dropout is not None:
            weights = dropout(weights)
        return torch.matmul(weights, value), weights

    class Heads(nn.Module):
        def __init__(self, h, d_model, dropout=0.1):
            super(Heads, self).__init__()
            assert d_model % h == 0
            self.width = d_model // h
            self.h = h
            self.projections = copies(nn.Linear(d_model, d_model), 4)
            self.weights = None
            self.dropout = nn.Dropout(p=dropout)

        def forward(self, query, key, value, mask=None):
            if mask is not None:
                mask = mask.unsqueeze(1)
            batch = query.size(0)
            query, key, value = [
                layer(x).view(batch, -1, self.h, self.width).transpose(1, 2)
                for layer, x in zip(self.projections, (query, key, value))
            ]
            x, self.weights = attend(query, key, value, mask=mask, dropout=self.dropout)
            x = x.transpose(1, 2).contiguous().view(batch, -1, self.h * self.width)
            del query, key, value
            return self.projections[-1](x)
''')
CS336 = code('''
    import math
    import torch
    from cs336_basics.nn.softmax import softmax
    from .linear import Linear


    def attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor,
                  mask: torch.Tensor | None = None) -> torch.Tensor:
        scores = torch.einsum("... q d, ... k d -> ... q k", Q, K) / math.sqrt(Q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return torch.einsum("... q k, ... k d -> ... q d", softmax(scores, dim=-1), V)


    class SelfAttention(torch.nn.Module):
        def __init__(self, d_model: int, heads: int, device=None, dtype=None):
            super().__init__()
            self.heads = heads
            self.qkv = Linear(d_model, 3 * d_model, device, dtype)
            self.out = Linear(d_model, d_model, device, dtype)

        def forward(self, x):
            t = x.shape[-2]
            keep = torch.tril(torch.ones(t, t, device=x.device, dtype=torch.bool))
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            q, k, v = (p.unflatten(-1, (self.heads, -1)).transpose(-3, -2) for p in (q, k, v))
            o = attention(q, k, v, keep)
            return self.out(o.transpose(-3, -2).flatten(-2))
''')


@pytest.mark.parametrize("source, helpers", [
    (NANOGPT, ()), (MINGPT, ("mingpt",)), (ANNOTATED, ()), (CS336, ("cs336_basics", "linear")),
], ids=["nanoGPT", "minGPT", "annotated-transformer", "cs336"])
def test_real_public_attention_code_keeps_the_rule(source, helpers):
    for rule in (ATTENTION_RULE, GQA_RULE):
        assert violations(source, rule, own(rule, *helpers)) == []


def test_nanogpts_flash_branch_is_the_attack_and_its_hasattr_probe_is_not():
    """nanoGPT probes for ``F.scaled_dot_product_attention`` by a string (a bool, harmless)
    and, in its flash branch, calls it: that call is what the rule is for."""
    line = NANOGPT_FLASH.splitlines().index("        if self.fused:") + 2
    assert violations(NANOGPT_FLASH, ATTENTION_RULE, own(ATTENTION_RULE)) == [
        f"torch.nn.functional.scaled_dot_product_attention (line {line})"]


def test_what_the_public_files_use_beyond_their_attention_is_named():
    """Their training and loading code is another matter: nanoGPT's ``import inspect``, CS336's
    einops and jaxtyping (not installed in the kit), the Annotated Transformer's ``os``."""
    assert violations("import inspect\n", ATTENTION_RULE) == ["import inspect (line 1)"]
    found = verdict("from einops import rearrange\nfrom jaxtyping import Float\n",
                    ATTENTION_RULE)
    assert found == ("it uses from einops import rearrange (line 1); from jaxtyping import Float"
                     " (line 2), and " + ATTENTION_RULE.imports_why)
    assert "numpy, math, typing" in found and "and torch, and the submission's own" in found


HONEST = {
    "einsum and moveaxis": '''
        import numpy as np
        def attend(q, k, v):
            s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
            w = np.exp(s - np.maximum.accumulate(s, axis=-1)[..., -1:])
            return np.moveaxis(w / np.add.reduce(w, axis=-1, keepdims=True), -1, -1) @ v
    ''',
    "dataclass helpers, private names, typing": '''
        from __future__ import annotations
        from dataclasses import dataclass, field
        from typing import Optional
        import numpy as np

        def _stable(x: np.ndarray) -> np.ndarray:
            return x - x.max(axis=-1, keepdims=True)

        @dataclass
        class _State:
            m: Optional[np.ndarray] = None
            seen: list[int] = field(default_factory=list)

            def __post_init__(self):
                self._count = 0

            def __len__(self) -> int:
                return self._count

        def softmax(logits, axis=-1):
            if not isinstance(logits, np.ndarray):
                raise ValueError(f"expected an array, got {type(logits).__name__}")
            state = _State()
            state._count += 1
            e = np.exp(_stable(np.asarray(logits, dtype=np.float64)))
            return e / e.sum(axis=axis, keepdims=True) + 0 * np.finfo(e.dtype).eps
    ''',
    "functools, itertools, math, collections, copy, numbers, abc, warnings": '''
        import abc
        import collections
        import copy
        import functools
        import itertools
        import math
        import numbers
        import warnings
        import numpy as np

        @functools.lru_cache(maxsize=None)
        def causal(t: int) -> np.ndarray:
            out = np.zeros((t, t), dtype=bool)
            for i, j in itertools.product(range(t), repeat=2):
                out[i, j] = j > i
            return out

        class Base(abc.ABC):
            @abc.abstractmethod
            def __call__(self, x): ...

        Pair = collections.namedtuple("Pair", "a b")

        def scale(d: numbers.Integral) -> float:
            if d > 4096:
                warnings.warn("wide heads", stacklevel=2)
            return 1 / math.sqrt(copy.copy(d))
    ''',
    "a torch module": '''
        import math
        import torch
        import torch.nn.functional as F
        from torch import Tensor, nn
        from torch.nn import Linear, Module

        class MultiHeadAttention(Module):
            def __init__(self, d_model, n_head, bias=False):
                super().__init__()
                self._k = Linear(d_model, d_model, bias=bias)
                self.scale = nn.Parameter(torch.ones(()), requires_grad=False)
                self.register_buffer("tri", torch.ones(8, 8, dtype=torch.bool).triu(1))

            def __repr__(self):
                return f"{self.__class__.__name__}(k={self._k})"

            def forward(self, x: Tensor, mask=None) -> Tensor:
                s = self._k(x) @ x.transpose(-2, -1) / math.sqrt(x.shape[-1])
                s = s.masked_fill(self.tri[: x.shape[1], : x.shape[1]],
                                  torch.finfo(s.dtype).min)
                return F.softmax(s, dim=-1) @ x
    ''',
    "its own scaled_dot_product_attention, as a function and a method": '''
        import torch

        def scaled_dot_product_attention(q, k, v):
            return torch.softmax(q @ k.mT, dim=-1) @ v

        class Attention(torch.nn.Module):
            def scaled_dot_product_attention(self, q, k, v):
                return scaled_dot_product_attention(q, k, v)

            def forward(self, x):
                return self.scaled_dot_product_attention(x, x, x)
    ''',
    "a main block": '''
        import numpy as np

        def softmax(x, axis=-1):
            e = np.exp(x - x.max(axis=axis, keepdims=True))
            return e / e.sum(axis=axis, keepdims=True)

        if __name__ == "__main__":
            print(softmax(np.zeros(3)), __name__)
            np.testing.assert_allclose(softmax(np.zeros(2)), [0.5, 0.5])
    ''',
}


@pytest.mark.parametrize("source", HONEST.values(), ids=HONEST.keys())
def test_honest_styles_pass(source):
    rule = ATTENTION_RULE if "torch" in source else NUMPY_RULE
    assert violations(code(source), rule, own(rule)) == []


# -- what the rule rejects, with its line -------------------------------------------------------
ATTACKS = [
    # modules outside the allow-list
    (NUMPY_RULE, "import gc", "import gc (line 1)"),
    (NUMPY_RULE, "import operator", "import operator (line 1)"),
    (NUMPY_RULE, "from operator import attrgetter", "from operator import attrgetter (line 1)"),
    (NUMPY_RULE, "import sys", "import sys (line 1)"),
    (NUMPY_RULE, "import os", "import os (line 1)"),
    (NUMPY_RULE, "import os.path", "import os.path (line 1)"),
    (NUMPY_RULE, "import io", "import io (line 1)"),
    (ATTENTION_RULE, "import importlib", "import importlib (line 1)"),
    (ATTENTION_RULE, "import builtins", "import builtins (line 1)"),
    (NUMPY_RULE, "import tracemalloc", "import tracemalloc (line 1)"),
    (NUMPY_RULE, "import pkgutil", "import pkgutil (line 1)"),
    (NUMPY_RULE, "from numpy import *", "from numpy import * (line 1)"),
    (NUMPY_RULE, "from . import secret_helper", "from . import secret_helper (line 1)"),
    (NUMPY_RULE, "from .. import softmax", "from .. import softmax (line 1)"),
    # lookups by a string, code run from a string, files
    (NUMPY_RULE, "x = 1\ny = getattr(x, 'real')", "getattr (line 2)"),
    (NUMPY_RULE, "g = getattr", "getattr (line 1)"),
    (NUMPY_RULE, "f = lambda x, g=getattr: g(x, 'y')", "getattr (line 1)"),
    (NUMPY_RULE, "vars()", "vars (line 1)"),
    (NUMPY_RULE, "open('x')", "open (line 1)"),
    (NUMPY_RULE, "exec('import torch')", "exec (line 1)"),
    (NUMPY_RULE, "eval('1')", "eval (line 1)"),
    (NUMPY_RULE, "compile('1', 'f', 'eval')", "compile (line 1)"),
    (NUMPY_RULE, "m = __import__('torch')", "__import__ (line 1)"),
    (NUMPY_RULE, "import typing\nh = typing.get_type_hints",
     "typing.get_type_hints (line 2)"),
    (NUMPY_RULE, "import functools\nw = functools.wraps", "functools.wraps (line 2)"),
    # underscores, dunders, frames
    (NUMPY_RULE, "x = 1\nx.__class__.__subclasses__()", ".__subclasses__ (line 2)"),
    (NUMPY_RULE, "def f():\n    pass\ng = f.__globals__", ".__globals__ (line 3)"),
    (NUMPY_RULE, "b = __builtins__", "__builtins__ (line 1)"),
    (NUMPY_RULE, "x = 1\nm = type(x).__mro__", ".__mro__ (line 2)"),
    (NUMPY_RULE, "import numpy as np\nd = np.random.__dict__",
     "numpy.random.__dict__ (line 2)"),
    (NUMPY_RULE, "x = 1\nhasattr(x, '__dict__')", "'__dict__' (line 2)"),
    (NUMPY_RULE, "g = (i for i in ())\nf = g.gi_frame", ".gi_frame (line 2)"),
    (ATTENTION_RULE, "import torch\nc = torch._C", "torch._C (line 2)"),
    (ATTENTION_RULE, "from torch import _C", "from torch import _C (line 1)"),
    (ATTENTION_RULE, "import torch\nclass T(torch.Tensor):\n    def __torch_function__(self):"
                     "\n        pass", "def __torch_function__ (line 3)"),
    (NUMPY_RULE, "import numpy as np\nx = np.add._private", "._private (line 2)"),
    (NUMPY_RULE, "class Raw:\n    __array_interface__ = {'data': (0, False)}",
     "__array_interface__ (line 2)"),
    (NUMPY_RULE, "import numpy as np\nv = np.lib.stride_tricks.as_strided",
     "numpy.lib.stride_tricks.as_strided (line 2)"),
    # escape hatches of the allowed modules
    (NUMPY_RULE, "import numpy as np\nc = np.ctypeslib", "numpy.ctypeslib (line 2)"),
    (NUMPY_RULE, "import numpy.ctypeslib", "import numpy.ctypeslib (line 1)"),
    (NUMPY_RULE, "from numpy import ctypeslib", "from numpy import ctypeslib (line 1)"),
    (NUMPY_RULE, "import numpy as np\np = np.zeros(1).ctypes.data", ".ctypes (line 2)"),
    (NUMPY_RULE, "import numpy as np\nx = np.load('x.npy', allow_pickle=True)",
     "numpy.load (line 2)"),
    # the red team's file reader: any file the worker sees, read into its own feedback
    (NUMPY_RULE, "import numpy as np\nimport numpy.ma.mrecords\n"
                 "t = np.ma.mrecords.openfile('/proc/self/cgroup').read()",
     "import numpy.ma.mrecords (line 2)"),
    (NUMPY_RULE, "import numpy as np\nt = np.ma.mrecords.openfile('/etc/hostname')",
     "numpy.ma.mrecords.openfile (line 2)"),
    (NUMPY_RULE, "from numpy.ma.mrecords import fromtextfile", "from numpy.ma.mrecords import "
     "fromtextfile (line 1)"),
    (NUMPY_RULE, "import numpy as np\nd = np.testing.tempdir()",
     "numpy.testing.tempdir (line 2)"),
    (NUMPY_RULE, "import dataclasses\nm = dataclasses.sys.modules",
     "dataclasses.sys.modules (line 2)"),
    (ATTENTION_RULE, "import torch\nlib = torch.library.Library('aten', 'IMPL')",
     "torch.library.Library (line 2)"),
    (ATTENTION_RULE, "import torch\nop = torch.ops.aten", "torch.ops.aten (line 2)"),
    (ATTENTION_RULE, "import torch\nos = torch.os", "torch.os (line 2)"),
    (ATTENTION_RULE, "import torch\nt = torch.load('weights.pt')", "torch.load (line 2)"),
    # changing another module
    (NUMPY_RULE, "import numpy as np\nbar = 1\nnp.foo = bar", "np.foo = ... (line 3)"),
    (ATTENTION_RULE, "import torch.nn.functional as F\ndef mine(x):\n    return x\n"
                     "F.softmax = mine", "F.softmax = ... (line 4)"),
    (NUMPY_RULE, "import math\nmath.pi += 1", "math.pi = ... (line 2)"),
    (NUMPY_RULE, "import tracemalloc\ntracemalloc.get_traced_memory = lambda: (0, 0)",
     "tracemalloc.get_traced_memory = ... (line 2)"),
    (NUMPY_RULE, "import numpy as np\ndel np.sum", "del np.sum (line 2)"),
    (ATTENTION_RULE, "import torch\nf = torch.nn.functional\nf.softmax = abs",
     "f.softmax = ... (line 3)"),
    (NUMPY_RULE, "import numpy as np\ndef patch(m=np):\n    m.sum = abs", "m.sum = ... (line 3)"),
    (NUMPY_RULE, "import numpy as np\nfor m in (np,):\n    m.sum = abs", "m.sum = ... (line 3)"),
    (ATTENTION_RULE, "import torch\nx = torch.zeros(1)\ntype(x).sum = abs",
     "type(x).sum = ... (line 3)"),
    (ATTENTION_RULE, "import torch\ndef get():\n    return torch", "torch (line 3)"),
    # the library's attention, another exercise's answer
    (ATTENTION_RULE, "import torch.nn.functional as F\ny = F.scaled_dot_product_attention",
     "F.scaled_dot_product_attention (line 2)"),
    (ATTENTION_RULE, "from torch.nn.functional import scaled_dot_product_attention",
     "from torch.nn.functional import scaled_dot_product_attention (line 1)"),
    (ATTENTION_RULE, "from torch import nn\nm = nn.MultiheadAttention(4, 2)",
     "nn.MultiheadAttention (line 2)"),
    (ATTENTION_RULE, "import torch\ny = torch.nn.functional.multi_head_attention_forward",
     "torch.nn.functional.multi_head_attention_forward (line 2)"),
    (ATTENTION_RULE, "from torch import nn\nlayer = nn.TransformerEncoderLayer(8, 2)",
     "nn.TransformerEncoderLayer (line 2)"),
    (ATTENTION_RULE, "from torch.nn.attention.varlen import varlen_attn",
     "from torch.nn.attention.varlen import varlen_attn (line 1)"),
    (GQA_RULE, "from .mha import MultiHeadAttention",
     "from .mha import MultiHeadAttention (line 1)"),
    (GQA_RULE, "from . import mha", "from . import mha (line 1)"),
    (GQA_RULE, "import mha", "import mha (line 1)"),
]


@pytest.mark.parametrize("rule, source, named", ATTACKS, ids=[a[1] for a in ATTACKS])
def test_an_attack_is_rejected_with_its_line(rule, source, named):
    assert named in violations(source + "\n", rule, own(rule))


def test_a_private_name_the_file_binds_never_whitelists_a_library_internal():
    source = code('''
        import torch

        class Sneaky:
            def __init__(self):
                self._C = 1

        with torch._C.DisableTorchFunction():
            pass
    ''')
    assert violations(source, ATTENTION_RULE) == [
        "._C (line 5)", "torch._C.DisableTorchFunction (line 7)"]


def test_a_numpy_file_that_imports_torch_gets_the_message_the_readme_quotes():
    assert verdict("import torch\n", NUMPY_RULE) == README_MESSAGE
    assert verdict("import numpy as np\n", NUMPY_RULE) is None


def test_each_rule_broken_gets_its_own_sentence():
    found = verdict("import torch\nimport os\nx = getattr\nimport numpy as np\nnp.x = 1\n",
                    NUMPY_RULE)
    assert found == (README_MESSAGE + "; it uses import os (line 2), and "
                     + NUMPY_RULE.imports_why + f"; it uses getattr (line 3), and {INTERNALS}"
                     + f"; it uses np.x = ... (line 5), and {PATCH}")


def test_the_allow_list_sentence_lists_what_the_exercise_may_import():
    assert NUMPY_RULE.imports_why == (
        "an exercise's file may import only numpy, math, typing, dataclasses, functools, "
        "itertools, numbers, collections, copy, abc and warnings, and the submission's own "
        "modules, each by name (no import *)")


def test_own_modules_are_importable_relatively_or_by_name_but_siblings_are_not():
    source = code('''
        import helper
        import pkg.sub
        from helper import f
        from .helper import g
        from . import helper, softmax
        from .pkg.sub import h
        from helper import _private
    ''')
    assert violations(source, NUMPY_RULE, frozenset({"helper", "pkg", "softmax"})) == []
    assert violations("from .softmax import softmax\n", NUMPY_RULE) == [
        "from .softmax import softmax (line 1)"]  # nothing is the file's own unless passed
    assert violations("from .mha import MultiHeadAttention\n", GQA_RULE,
                      frozenset({"mha"})) == ["from .mha import MultiHeadAttention (line 1)"]


def test_an_own_module_named_after_an_installed_one_is_not_imported_by_name():
    """``import os`` gets Python's os however the submission names its files; a relative
    import is the submission's own."""
    own_os = frozenset({"os", "torch"})
    assert violations("import os\n", NUMPY_RULE, own_os) == ["import os (line 1)"]
    assert verdict("import torch\n", NUMPY_RULE, own_os) == README_MESSAGE
    assert violations("from .os import path\n", NUMPY_RULE, own_os) == []


def test_a_helper_module_keeps_the_rule_too():
    """Every file of the submission is checked on its own: the helper that imports torch
    breaks the NumPy rule, whoever imports it."""
    assert verdict("import torch\n", NUMPY_RULE, own(NUMPY_RULE, "helper")) == README_MESSAGE
    assert violations("from .helper import torch\n", NUMPY_RULE,
                      own(NUMPY_RULE, "helper")) == []


def test_source_that_does_not_parse_is_left_to_the_worker():
    assert violations("def f(:\n", NUMPY_RULE) == [] and verdict("def f(:\n", NUMPY_RULE) is None


# -- through the grader: the exercise scores 0 and the report names the line --------------------
def grade(tmp_path, files, exercise):
    result = engine.grade_submission(make_submission(tmp_path / "student", files),
                                     exercises=[exercise], limits=LIMITS)
    return result.results[exercise]


@pytest.mark.parametrize("source, named", [
    ("import torch\ndef softmax(logits, axis=-1):\n"
     "    return torch.softmax(torch.as_tensor(logits), axis).numpy()\n", README_MESSAGE),
    ("import importlib\nt = importlib.import_module('torch')\n", "import importlib (line 1)"),
    ("import numpy as np\nf = getattr(np, 'su' + 'm')\n", "getattr (line 2)"),
])
def test_a_numpy_file_that_breaks_the_rule_scores_zero(tmp_path, source, named):
    softmax = grade(tmp_path, {"softmax.py": source}, "softmax")
    assert softmax.score == 0 and named in softmax.error


def test_mha_may_not_call_the_library_attention(tmp_path):
    key = (SOLUTIONS / "mha.py").read_text()
    line = "        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, H, T, T)"
    assert line in key
    source = key.replace(line, "        import torch.nn.functional as F\n"
                               "        y = F.scaled_dot_product_attention(q, k, v)\n" + line)
    mha = grade(tmp_path, {"mha.py": source}, "mha")
    assert mha.score == 0 and "F.scaled_dot_product_attention (line" in mha.error


def test_gqa_may_not_borrow_the_kits_multi_head_attention(tmp_path):
    source = (SOLUTIONS / "gqa.py").read_text() + "\nfrom .mha import MultiHeadAttention\n"
    gqa = grade(tmp_path, {"gqa.py": source}, "gqa")
    assert gqa.score == 0 and "from .mha import MultiHeadAttention (line" in gqa.error
