"""Library delegation: what an exercise's files may use, as an allow-list.

Each exercise declares its ``Rule`` (``Exercise(..., rule=...)``). Every file of a submission,
helper packages included, is read before any of it runs, and may use only:

- the modules its rule allows (``Rule.imports``, with their submodules of ``MODULES``) and the
  submission's own (``own_modules``);
- of each such module, the attributes its list names (``NAMES``, in
  ``grader.core.delegation_names``, written from the installed libraries by
  tools/delegation_names.py): a chain off the list is refused with its full dotted name
  (``numpy.testing.runstring``), however the module was reached (``t = np.testing``);
- of a value (``x.sum()``, ``self._cache``), any attribute but those of the families that
  reach frames, code, raw memory or files (``FAMILIES``), the underscore names it does not
  bind itself, and dunders beyond a few (``DUNDERS``; a class may define its own, not
  ``HOOKS``), never a library's internals (``INTERNAL``);
- no builtin that looks up by a string or runs code (``getattr``, ``exec``: ``FORBIDDEN``);
- a module only at the head of a chain, under another name (``F = torch.nn.functional``) or
  in ``hasattr``: never changed (``np.sum = mine``), nor handed around (``return torch``);
  from the submission's own modules, what they define, never a module they import (the
  reader reports each file's modules and what it takes, ``grader.core.view`` compares them);
- none of the library calls the exercise is to write (``Rule.calls``), and none of the
  exercises it may not borrow (``Rule.siblings``).

Code that does an exercise needs nothing else: the answer key, the bug zoo and the attention
code of nanoGPT, minGPT, the Annotated Transformer and CS336 solutions keep to it
(tests/test_delegation.py, tests/test_delegation_names.py). The worker checks again at run
time for what the source hides. A file that breaks the rule scores 0, and the report names
what it used and the line.

RestrictedPython (9.0) does this job for Zope: it rewrites a file so that every attribute,
item and iteration goes through a guard the host supplies. Over the 176 honest files of the
kit (the key, the 120 zoo entries, the five students of tests/similar/, the four public
files), its ``compile_restricted`` refuses 49, 29 of them zoo entries, for a name or an
attribute that starts with an underscore (``super().__init__()``, ``self._cache``,
``_stable``, ``__len__``) or an annotated assignment; the other 127 it compiles rewritten,
to run under guards the worker would supply on every attribute read. This rule refuses one
(the zoo entry that does a NumPy exercise in torch, as it should) and none of the 497
disguised copies of the key and the students (RestrictedPython: 126), and the worker runs
each file as written: this rule is the one kept.

The grading process never applies the rule to a student's text: the reader does
(``grader.sandbox.reader``), under the exercise's limits. It is sent this module's source and
those it is split into (``reader.SOURCES``): ``grader.core.delegation_names`` (the lists),
``delegation_bindings`` (what a file's names are bound to), ``delegation_scan`` (each place
that breaks the rule) and ``delegation_verdicts`` (a file's verdict, and what the reader
sends of it).
"""

from __future__ import annotations

import re
import sys
import types
from dataclasses import dataclass

SCIENTIFIC = ("torch", "scipy", "jax", "jaxlib", "tensorflow")
# torch's attention, and the layers and kernels built on it (nn.TransformerEncoderLayer holds
# an nn.MultiheadAttention, torch.nn.attention offers flex and varlen attention).
ATTENTION_CALLS = tuple("""scaled_dot_product_attention multi_head_attention_forward
    MultiheadAttention _native_multi_head_attention flex_attention varlen_attn varlen_attn_out
    Transformer TransformerEncoder TransformerDecoder TransformerEncoderLayer
    TransformerDecoderLayer""".split())
# Each with the submodules of ``MODULES`` (``numpy.linalg``, ``collections.abc``), and of each
# only the attributes ``NAMES`` lists (grader/core/delegation_names.py, written by
# tools/delegation_names.py). Beyond the list: numbers (the key's input checks),
# collections, copy (the Annotated Transformer's clones), abc and warnings, pure-Python helpers
# that run nothing by name. enum stays out: Python 3.12 exposes builtins as ``enum.bltns``.
NUMPY_IMPORTS = ("numpy", "math", "typing", "dataclasses", "functools", "itertools",
                 "__future__", "numbers", "collections", "copy", "abc", "warnings")
TORCH_IMPORTS = NUMPY_IMPORTS + ("torch",)  # torch.nn, torch.nn.functional and the rest
# Names that an absolute import resolves to an installed module, whatever file of the same
# name the submission holds (the worker has them loaded, or finds them first).
INSTALLED = frozenset(sys.stdlib_module_names) | frozenset(sys.builtin_module_names) | {
    *SCIENTIFIC, *TORCH_IMPORTS, "torchgen", "typing_extensions"}

# Builtins that fetch by a string (getattr, vars, globals, ...), run or import code (exec,
# eval, compile, __import__, breakpoint, help: pydoc imports by name), read files or stdin
# (open, input), or hand out raw memory (memoryview). Flagged as any name, so ``g = getattr``
# is caught too; only ``input`` may be the file's own name (``def forward(self, input)``, as
# nanoGPT and torch itself write), since the builtin would only read the worker's stdin.
FORBIDDEN = frozenset("""getattr setattr delattr vars globals locals open exec eval compile
    __import__ breakpoint input help memoryview""".split())
# Attribute names that reach what array code never needs, by family: refused on any object (a
# value's attributes, ``x.sum()``, ``self.w``, are judged by these and the underscore rules
# alone) and kept off every module's list (tools/delegation_names.py). Frames, generators and
# code objects (f_back, gi_frame, cr_code, tb_frame, co_consts: a frame's f_globals holds
# __builtins__); raw memory (an array's ctypes, a bit generator's cffi and capsule, a tensor's
# storage and data_ptr (a student's own ``self.ptr`` is not one), as_strided, dlpack,
# frombuffer, shared memory); files and pickles (tofile, from_file, memmap, dump); compiling
# (nn.Module.compile). No honest file of the kit's (tests/test_delegation.py) reads an
# attribute of these families.
# The frame family is the attributes those types have (``self.f_proj``, a student's own name,
# is none of them), read from the interpreter that applies the rule.
_INTERPRETER = tuple(sorted({name for kind in (
    types.FrameType, types.CodeType, types.GeneratorType, types.CoroutineType,
    types.AsyncGeneratorType, types.TracebackType) for name in dir(kind)
    if re.match(r"(f|gi|cr|ag|tb|co)_", name)}))
FAMILIES = re.compile(r"^(" + "|".join(_INTERPRETER) + r")$|ctypes|cffi|capsule|storage"
                      r"|_strided|dlpack|from_?buffer|^data_ptr$|^share_memory"
                      r"|(^|_|to|from|open)file|mmap|(^|_)dumps?$|pickle|^compile$")
# Library internals a file may not name even when it binds the name itself (``self._C = 1``
# does not make ``torch._C`` the file's own).
INTERNAL = frozenset("""_C _VF _ops _dynamo _refs _prims _decomp _functorch _library
    _higher_order_ops _jit_internal _tensor _utils _python_dispatch _pytree _getframe
    _disable_torch_function _disable_torch_function_impl _native_multi_head_attention
    _modules _parameters _buffers _forward_hooks _forward_pre_hooks _backward_hooks _cdata
    _make_subclass _make_wrapper_subclass _core _internal _multiarray_umath _globals""".split())
INTERNAL_PREFIXES = ("_scaled_dot_product", "_flash_attention", "_efficient_attention")
# Dunders that only describe an object: __class__ is type(x), which any file may call.
DUNDERS = frozenset({"__init__", "__name__", "__qualname__", "__class__", "__doc__",
                     "__version__", "__main__"})
# Dunders a class may not define: they re-route the libraries' dispatch, or hand NumPy and
# torch a raw memory address to make an array of (``__array_interface__``).
HOOKS = frozenset("""__torch_function__ __torch_dispatch__ __array_function__ __array_ufunc__
    __array_interface__ __array_struct__ __cuda_array_interface__ __dlpack__""".split())
INTERNALS = ("an exercise's file may not reach into Python's or the libraries' internals "
             "(names that start with an underscore, getattr, setattr, vars, globals, open, "
             "exec, eval, compile, __import__, frames, code objects, raw memory, files, "
             "pickles)")
NAMES_WHY = ("an exercise's file may use of each module it imports only what array code "
             "needs (its array and tensor operations, dtypes, layers and pure helpers, as "
             "grader/core/delegation_names.py lists them), nothing that reaches files, memory, "
             "code or the process")
OWN_WHY = ("an exercise's file may take from the submission's own modules what they define, "
           "not a module they import")
PATCH = "an exercise's file may not change another module's attributes"
HANDLE = ("an exercise's file may use a module it imports only through its attributes "
          "(np.exp, torch.nn) or under another name (F = torch.nn.functional), not hand the "
          "module itself around")


@dataclass(frozen=True)
class Rule:
    modules: tuple[str, ...] = ()  # packages named in ``why``: importing one gives that reason
    calls: tuple[str, ...] = ()  # functions or classes (by name) it may not reference
    siblings: tuple[str, ...] = ()  # other exercises it may not import
    why: str = ""  # the sentence the report gives for ``modules`` and ``calls``
    imports: tuple[str, ...] = TORCH_IMPORTS  # the modules it may import (submodules too)

    @property
    def imports_why(self) -> str:
        *most, last = [m for m in self.imports if m != "__future__"]
        return (f"an exercise's file may import only {', '.join(most)} and {last}, and the "
                "submission's own modules, each by name (no import *)")

    @property
    def siblings_why(self) -> str:
        return (f"the exercise may not import {' or '.join(self.siblings)}: another exercise, "
                "whose answer would do its work")


NUMPY_RULE = Rule(modules=SCIENTIFIC, imports=NUMPY_IMPORTS,
                  why="a NumPy exercise may not use torch, scipy, jax or tensorflow")
ATTENTION_RULE = Rule(calls=ATTENTION_CALLS,
                      why="the exercise is to write attention, so it may not call "
                          "nn.MultiheadAttention, F.multi_head_attention_forward or "
                          "F.scaled_dot_product_attention, nor the layers built on them")
