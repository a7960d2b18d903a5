"""Library delegation: what an exercise's files may use, as an allow-list.

Each exercise declares its ``Rule`` (``Exercise(..., rule=...)``). Every file of a submission,
helper packages included, is read before any of it runs, and may use only:

- the modules its rule allows (``Rule.imports``) and the submission's own (``own_modules``);
- no name that starts with an underscore but a few harmless dunders (``DUNDERS``), the dunder
  methods its classes define and the private names it binds itself (``_stable``,
  ``self._cache``), never a library's internals (``INTERNAL``);
- no builtin that looks up by a string or runs code (``getattr``, ``exec``: ``FORBIDDEN``),
  no attribute through which an allowed module reaches Python's machinery, native code, files
  or pickles (``torch.sys``, ``np.ctypeslib``, ``torch.load``: ``BLOCKED``);
- a module only through its attributes: never changed (``np.sum = mine``), nor handed around
  (``return torch``);
- none of the library calls the exercise is to write (``Rule.calls``), and none of the
  exercises it may not borrow (``Rule.siblings``).

Code that does an exercise needs nothing else: the answer key, the bug zoo and the attention
code of nanoGPT, minGPT, the Annotated Transformer and CS336 solutions keep to it
(tests/test_delegation.py). The worker checks again at run time for what the source hides.
A file that breaks the rule scores 0, and the report names what it used and the line.

The grading process never runs this on a student's text: the reader does
(``grader.sandbox.reader``, which is sent this module's source), under the exercise's limits.
The scan costs time and memory in proportion to the file, however it is written: names bound
to a library through others are found with a worklist (``_Scan.spread``), each assignment
taken up once, not in a pass over the file per name; an attribute chain, a sum of strings and
a place's text are each worked out once, not once per link (tests/test_reader.py).
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field

SCIENTIFIC = ("torch", "scipy", "jax", "jaxlib", "tensorflow")
# torch's attention, and the layers and kernels built on it (nn.TransformerEncoderLayer holds
# an nn.MultiheadAttention, torch.nn.attention offers flex and varlen attention).
ATTENTION_CALLS = tuple("""scaled_dot_product_attention multi_head_attention_forward
    MultiheadAttention _native_multi_head_attention flex_attention varlen_attn varlen_attn_out
    Transformer TransformerEncoder TransformerDecoder TransformerEncoderLayer
    TransformerDecoderLayer""".split())
# Each with its submodules (``numpy.linalg``, ``collections.abc``). Beyond the list:
# numbers (the key's input checks), collections, copy (the Annotated Transformer's clones),
# abc and warnings, pure-Python helpers that run nothing by name. enum stays out: Python 3.12
# exposes builtins as ``enum.bltns``.
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
# Attributes (and imported names) that honest attention code never needs, each an escape:
BLOCKED = frozenset(" ".join((
    # Python's machinery, re-exported by allowed modules (torch.sys, typing.sys, enum.bltns,
    # dataclasses.inspect, torch.nn.functional.importlib, ...)
    "sys os builtins bltns inspect importlib ctypes gc operator io tracemalloc types mp",
    "subprocess threading multiprocessing concurrent weakref copyreg pickle pickletools",
    "marshal runpy shutil pathlib glob tempfile socket signal platform traceback linecache",
    "logging dis gzip tarfile zipfile",
    # frames and code objects (a generator's gi_frame.f_globals holds __builtins__)
    "gi_frame gi_code cr_frame cr_code ag_frame ag_code f_back f_globals f_locals f_builtins",
    "f_code tb_frame tb_next co_code co_consts",
    # native code: ctypes through NumPy, C++, CUDA and Metal extensions, shared libraries
    "ctypeslib from_address from_buffer load_library cpp_extension load_inline jiterator",
    "CUDAPluggableAllocator XPUPluggableAllocator change_current_allocator compile_shader",
    "load_metallib f2py distutils extbuild as_strided",  # NumPy's as_strided checks no bounds
    # files and pickles (a pickle runs any callable it names)
    "load loads save savez savez_compressed savetxt loadtxt genfromtxt fromfile tofile",
    "from_file fromregex memmap open_memmap read_array write_array DataSource npyio dump",
    "mrecords openfile fromtextfile tempdir temppath",  # np.ma.mrecords.openfile(path).read()
    "dumps serialization PyTorchFileReader PyTorchFileWriter GdsFile tunable load_nvprof",
    # torch's operator registry and dispatch, code generation and loading, remote code
    "library ops classes overrides jit fx compile compiler export package hub utils onnx",
    "distributed TorchDispatchMode TorchFunctionMode DispatchKey DispatchKeySet",
    "ExcludeDispatchKeyGuard python_native import_ir_module import_ir_module_from_buffer",
    "set_default_tensor_type",
    # lookups by a string: eval of annotations, attributes copied by name, classes by name
    "get_type_hints ForwardRef evaluate_forward_ref get_annotations update_wrapper wraps",
    "make_dataclass",
    # the forbidden builtins where a module offers them as attributes
    "getattr setattr delattr vars globals locals exec breakpoint open",
)).split())
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
             "exec, eval, compile, __import__, sys, os, gc, operator, ctypes, frames, pickles)")
PATCH = "an exercise's file may not change another module's attributes"
HANDLE = ("an exercise's file may use a module it imports only through its attributes "
          "(np.exp, torch.nn), not hand the module itself around")
Finding = tuple[int, int, str, str]  # line, column (where it ends), what, why
WHAT_CAP = 2000  # characters of a finding's "what" (a long string literal's repr, say)
NESTED = "it is nested too deeply for Python's parser (line 1)"


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


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _internal(name: str) -> bool:
    return name in INTERNAL or name.startswith(INTERNAL_PREFIXES)


def _root(expr: ast.expr) -> ast.expr | None:
    """The object an attribute chain starts from (None through ``__class__``: a class)."""
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        if isinstance(expr, ast.Attribute) and expr.attr == "__class__":
            return None
        expr = expr.value
    return expr


# Expressions that hold a library when any of their parts does (``(np, F)``, ``a or torch``).
HOLDERS = (ast.Tuple, ast.List, ast.Set, ast.Dict, ast.IfExp, ast.BoolOp, ast.Starred,
           ast.NamedExpr)


def _holds_library(expr: ast.AST | None, libraries: set[str]) -> bool:
    """Whether ``expr`` is a module, a part of one (``torch.nn.functional``, ``nn.Linear``,
    ``type(x)``) or a literal holding one (``(np, F)``): what an attribute store may not
    change. A call's result (``nn.Linear(4, 4)``) is the caller's own object."""
    names: set[str] = set()
    return _depends(expr, names) or not names.isdisjoint(libraries)


def _depends(expr: ast.AST | None, names: set[str]) -> bool:
    """True when ``expr`` holds a library whatever its names are bound to (``type(x)``,
    ``x.__class__``); otherwise adds to ``names`` those that make it hold one when any of
    them is bound to a library (``_holds_library``)."""
    if isinstance(expr, HOLDERS):
        return any(_depends(e, names) for e in ast.iter_child_nodes(expr))
    if isinstance(expr, ast.Call):
        return isinstance(expr.func, ast.Name) and expr.func.id == "type"
    if isinstance(expr, (ast.Attribute, ast.Subscript)):
        root = _root(expr)
        return root is None or _depends(root, names)
    if isinstance(expr, ast.Name):
        names.add(expr.id)
    return False


@dataclass
class _Scan(ast.NodeVisitor):
    """One file's syntax tree: ``bind`` collects the names it binds (its own, the libraries'),
    then the visit flags each place that breaks the rule."""

    rule: Rule
    own: frozenset[str]  # own modules a relative import may name
    found: list[Finding] = field(default_factory=list)
    bound: set[str] = field(default_factory=set)  # names the file binds (not library imports)
    libraries: set[str] = field(default_factory=set)  # names bound to a library or its parts
    members: set[int] = field(default_factory=set)  # ids of class-body defs and targets
    helpers: set[str] = field(default_factory=set)  # names bound to the submission's modules
    modules: set[str] = field(default_factory=set)  # names ``import x`` binds to a library
    through: set[int] = field(default_factory=set)  # ids of names read as ``name.attribute``
    held: dict[int, bool] = field(default_factory=dict)  # id of an expression -> ``holds``
    sums: dict[int, str | None] = field(default_factory=dict)  # id of a BinOp -> its flag
    texts: dict[int, str] = field(default_factory=dict)  # id of an attribute -> its source

    def flag(self, node: ast.AST, what: str, why: str) -> None:
        if len(what) > WHAT_CAP:
            what = what[:WHAT_CAP] + " [...]"
        self.found.append((getattr(node, "lineno", 0), getattr(node, "end_col_offset", 0),
                           what, why))

    def holds(self, expr: ast.AST | None) -> bool:
        """``_holds_library(expr, self.libraries)`` once the names are bound, each attribute
        chain (``x._a._b._c``) walked once however many of its links are asked about."""
        chain = []
        while isinstance(expr, (ast.Attribute, ast.Subscript)) and id(expr) not in self.held:
            chain.append(expr)
            expr = expr.value
        if isinstance(expr, (ast.Attribute, ast.Subscript)):
            held = self.held[id(expr)]
        elif isinstance(expr, HOLDERS):
            held = any(self.holds(e) for e in ast.iter_child_nodes(expr))
        else:
            held = _holds_library(expr, self.libraries)
        for link in reversed(chain):  # from the root out: x.__class__.y holds from there on
            held = held or isinstance(link, ast.Attribute) and link.attr == "__class__"
            self.held[id(link)] = held
        return held

    def unparsed(self, node: ast.Attribute) -> str:
        """``ast.unparse(node)``, the links of an attribute chain (``F.a.b.c``) written once
        for the whole chain: each link's text is the one inside it and ``.name``. Kept until
        the visit reaches that link (``visit_Attribute``)."""
        chain = []
        while isinstance(node.value, ast.Attribute) and id(node) not in self.texts:
            chain.append(node)
            node = node.value
        # past WHAT_CAP a finding shows the start alone (``flag``): the rest is never written
        text = self.texts.get(id(node)) or ast.unparse(node)[:WHAT_CAP + 1]
        self.texts[id(node)] = text
        for link in reversed(chain):
            text = self.texts[id(link)] = f"{text}.{link.attr}"[:WHAT_CAP + 1]
        return text

    # -- the file's own names, first ---------------------------------------------------------
    def own_import(self, node: ast.Import | ast.ImportFrom, name: str | None) -> bool:
        top = (name or "").split(".")[0]
        if isinstance(node, ast.ImportFrom) and node.level:
            return True
        return top in self.own and top not in INSTALLED

    def bind(self, tree: ast.AST) -> None:
        sources: list[tuple[ast.expr, ast.expr | None]] = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.bound.add(node.name)
            elif isinstance(node, ast.arg):
                self.bound.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.bound.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                self.bound.add(node.attr)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self.bound.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    name = alias.asname or alias.name.split(".")[0]
                    module = alias.name if isinstance(node, ast.Import) else node.module
                    own = self.own_import(node, module)
                    (self.bound if own else self.libraries).add(name)
                    if own:
                        self.helpers.add(name)
                    elif isinstance(node, ast.Import):
                        self.modules.add(name)
            if isinstance(node, ast.Assign):
                sources += [(target, node.value) for target in node.targets]
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)):
                sources.append((node.target, node.value))
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                sources.append((node.target, node.iter))
            elif isinstance(node, ast.withitem) and node.optional_vars:
                sources.append((node.optional_vars, node.context_expr))
            elif isinstance(node, ast.arguments):  # def patch(m=np): m.sum = mine
                positional = [*node.posonlyargs, *node.args]
                sources += [(ast.Name(a.arg), d) for a, d in
                            zip(positional[len(positional) - len(node.defaults):], node.defaults)]
                sources += [(ast.Name(a.arg), d) for a, d in zip(node.kwonlyargs,
                                                                 node.kw_defaults)]
            elif isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt]
                    self.members.update(id(t) for t in targets)
        self.spread(sources)

    def spread(self, sources: list[tuple[ast.expr, ast.expr | None]]) -> None:
        """Add to ``libraries`` every name bound to one through others (``f = torch.nn``,
        ``g = f``), in any order of the lines: a worklist over names, each value taken up
        once, when a name it depends on turns out to hold a library (``_depends``)."""
        targets: dict[int, list[ast.expr]] = {}  # a value (``a = b = value``) -> its targets
        waiting: dict[str, list[int]] = {}  # name -> the values that hold a library if it does
        todo = list(self.libraries)
        for target, value in sources:
            if id(value) in targets:
                targets[id(value)].append(target)
                continue
            targets[id(value)] = [target]
            names: set[str] = set()
            if _depends(value, names):
                todo.append("")  # no name: a value that holds a library whatever they are
                waiting.setdefault("", []).append(id(value))
            for name in names:
                waiting.setdefault(name, []).append(id(value))
        while todo:
            for value in waiting.pop(todo.pop(), ()):
                for target in targets.pop(value, ()):
                    todo += self.bind_library(target)

    def bind_library(self, target: ast.expr) -> list[str]:
        """The names of ``target`` newly bound to a library (a value that holds one)."""
        names = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)} - self.libraries
        self.libraries |= names
        return list(names)

    # -- imports ------------------------------------------------------------------------------
    def module(self, node: ast.AST, dotted: str, what: str) -> bool:
        """Check an absolute import of ``dotted``; True when it may be imported."""
        top, *parts = dotted.split(".")
        why = (self.rule.why if top in self.rule.modules else
               self.rule.siblings_why if top in self.rule.siblings else
               self.rule.imports_why if top not in self.rule.imports else
               INTERNALS if any(p.startswith("_") or p in BLOCKED for p in parts) else None)
        if why:
            self.flag(node, what, why)
        return why is None

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if not self.own_import(node, alias.name):
                self.module(node, alias.name, f"import {alias.name}")
            self.binding(node, alias.asname)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        names = ", ".join(a.name for a in node.names)
        what = f"from {'.' * node.level}{node.module or ''} import {names}"
        if node.level:  # from .helper import f, from . import helper
            tops = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
            for top in tops:
                if top in self.rule.siblings:
                    self.flag(node, what, self.rule.siblings_why)
                elif node.level > 1 or top not in self.own:
                    self.flag(node, what, self.rule.imports_why)
        elif not self.own_import(node, node.module) and self.module(node, node.module or "",
                                                                    what):
            for alias in node.names:
                if alias.name == "*":
                    self.flag(node, what, self.rule.imports_why)
                elif alias.name in self.rule.calls:
                    self.flag(node, f"from {node.module} import {alias.name}", self.rule.why)
                elif node.module != "__future__" and (
                        alias.name.startswith("_") or alias.name in BLOCKED):
                    self.flag(node, f"from {node.module} import {alias.name}", INTERNALS)
        for alias in node.names:
            self.binding(node, alias.asname)

    # -- names and attributes -----------------------------------------------------------------
    def binding(self, node: ast.AST, name: str | None, what: str | None = None) -> None:
        """A name the file binds: never a library internal, nor a dunder outside a class."""
        if name and (_internal(name) or _dunder(name) and not (
                name == "__init__" or name == "__all__" and isinstance(node, ast.Name)
                or id(node) in self.members and name not in HOOKS)):
            self.flag(node, what or name, INTERNALS)

    def readable(self, name: str, root: ast.expr | None = None) -> bool:
        """Whether a private or dunder name may be read (through ``root``, for an attribute)."""
        if name in DUNDERS:
            return True
        if _dunder(name) or _internal(name):
            return False
        if root is not None and self.holds(root):
            return False  # torch._anything, type(x)._anything
        if isinstance(root, ast.Name) and root.id in self.helpers:
            return True  # helper._stable: the submission's own private name
        return name in self.bound or name in self.libraries

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in FORBIDDEN and not (node.id == "input" and "input" in self.bound):
            self.flag(node, node.id, INTERNALS)
        elif isinstance(node.ctx, ast.Store) and node.id.startswith("_"):
            self.binding(node, node.id)
        elif node.id.startswith("_") and not self.readable(node.id):
            self.flag(node, node.id, INTERNALS)
        elif node.id in self.rule.calls and node.id not in self.bound:
            self.flag(node, node.id, self.rule.why)
        elif node.id in self.modules and id(node) not in self.through:
            self.flag(node, node.id, HANDLE)  # return torch; m = get(); m._inductor

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr, store = node.attr, not isinstance(node.ctx, ast.Load)
        self.through.add(id(node.value))
        shown = self.texts.pop(id(node), None)
        if attr in BLOCKED:
            self.flag(node, f".{attr}", INTERNALS)
        elif store and attr.startswith("_"):
            self.binding(node, attr, f".{attr}")
        elif attr.startswith("_") and not self.readable(attr, node.value):
            self.flag(node, f".{attr}", INTERNALS)
        elif attr in self.rule.calls and (
                attr not in self.bound or self.holds(node.value)):
            self.flag(node, shown or self.unparsed(node), self.rule.why)
        if store:
            self.patch(node)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if not isinstance(node.ctx, ast.Load):
            self.patch(node)
        self.generic_visit(node)

    def patch(self, node: ast.Attribute | ast.Subscript) -> None:
        """An assignment or ``del`` through ``node``: the object changed must be the file's
        own (``self.w = ...``, ``out[i] = ...``), not a module or a library's class."""
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            return  # table["k"] = v: the file's own container, whatever it holds
        root = _root(node.value)
        if not isinstance(root, ast.Name) or root.id in self.libraries:
            shown = ast.unparse(node)
            self.flag(node, f"del {shown}" if isinstance(node.ctx, ast.Del) else
                      f"{shown} = ...", PATCH)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                          ) -> None:
        kind = "class" if isinstance(node, ast.ClassDef) else "def"
        self.binding(node, node.name, f"{kind} {node.name}")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_arg(self, node: ast.arg) -> None:
        self.binding(node, node.arg)
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        if node.arg and node.arg.startswith("_") and not self.readable(node.arg):
            self.flag(node.value, f"{node.arg}=", INTERNALS)
        self.generic_visit(node)

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        # `case object(__globals__=g)` reads the attribute named by each keyword, as
        # getattr would: each is held to what an attribute read is held to
        for attr in node.kwd_attrs:
            if attr in BLOCKED or (attr.startswith("_") and not self.readable(attr)):
                self.flag(node, f"case ...({attr}=...)", INTERNALS)
            elif attr in self.rule.calls:
                self.flag(node, f"case ...({attr}=...)", self.rule.why)
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        # a dunder spelled in pieces: "_" + "_builtins_" + "_"
        if id(node) not in self.sums:
            self.sums.update(_dunder_sums(node))
        shown = self.sums.pop(id(node))
        if shown is not None:
            self.flag(node, shown, INTERNALS)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        # a dunder by its name: hasattr(x, "__dict__"), type("T", (), {"__torch_function__": f});
        # a format field that reads a private attribute: "{0.__globals__}".format(f)
        if isinstance(node.value, str) and (
                (_dunder(node.value) and node.value not in DUNDERS)
                or FORMAT_FIELD.search(node.value)):
            self.flag(node, repr(node.value), INTERNALS)


FORMAT_FIELD = re.compile(r"\{[^{}]*[.\[]\s*_")


def _dunder_sums(top: ast.BinOp) -> dict[int, str | None]:
    """For ``top`` and each BinOp under it joined by ``+``: the repr to flag of the string its
    constants make when that is a dunder (``"_" + "_class_" + "_"``), else None. One pass from
    the leaves up, so a sum of n strings costs n steps, not one per BinOp in it."""
    shown: dict[int, str | None] = {}
    folded: dict[int, str | None] = {}  # a node's string, kept until its parent is done
    todo: list[tuple[ast.expr, bool]] = [(top, False)]
    while todo:
        node, ready = todo.pop()
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            folded[id(node)] = node.value
        elif not isinstance(node, ast.BinOp):
            folded[id(node)] = None
        elif not ready:
            todo += [(node, True), (node.right, False), (node.left, False)]
        else:
            left, right = folded.pop(id(node.left)), folded.pop(id(node.right))
            value = (left + right if isinstance(node.op, ast.Add) and left is not None
                     and right is not None else None)
            folded[id(node)] = value
            shown[id(node)] = (repr(value) if value is not None and _dunder(value)
                               and value not in DUNDERS else None)
    return shown


def parse(source: str | bytes) -> ast.Module | None:
    """The syntax tree of ``source``, a file's bytes read as the interpreter reads them (its
    coding line honoured), or None when it does not parse: the worker's import then says what
    is wrong. RecursionError and MemoryError (nested too deeply for the parser) propagate."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def findings(tree: ast.Module, rule: Rule, own_modules: frozenset[str]) -> list[Finding]:
    """The places in ``tree`` that break ``rule``, in the order of the file."""
    scan = _Scan(rule, frozenset(own_modules) - set(rule.siblings))
    scan.bind(tree)
    scan.visit(tree)
    return sorted(scan.found)


def violations(source: str | bytes, rule: Rule,
               own_modules: frozenset[str] = frozenset()) -> list[str]:
    """The places in ``source`` that break ``rule``, as "what (line N)" (none when it does
    not parse: the worker's import then says what is wrong).

    ``own_modules``, passed by the caller, are the submission's modules the file may import:
    the stems of its ``.py`` files, its package folders, and the exercises it may import
    (``from .softmax import softmax``); ``rule.siblings`` are taken out. A relative import may
    name only these, an absolute one only those no installed module shadows (``INSTALLED``)."""
    tree = parse(source)
    found = findings(tree, rule, own_modules) if tree is not None else []
    return [f"{what} (line {line})" for line, _, what, _ in found]


def verdict(source: str | bytes, rule: Rule,
            own_modules: frozenset[str] = frozenset()) -> str | None:
    """Why ``source`` may not be graded, or None: what it uses and where, then the rule it
    breaks ("it uses import torch (line 1), and a NumPy exercise may not use torch, ..."),
    one such sentence per rule broken."""
    try:
        tree = parse(source)
        return worded(findings(tree, rule, own_modules)) if tree is not None else None
    except (RecursionError, MemoryError):  # Python's own parser gives up on it too
        return NESTED


def worded(found: list[Finding]) -> str | None:
    """``verdict``'s sentences for ``found``: the first three places of each rule broken."""
    groups: dict[str, list[str]] = {}
    more: set[str] = set()  # the rules broken in more than three places
    for line, _, what, why in found:
        shown = groups.setdefault(why, [])
        if len(shown) < 3:
            shown.append(f"{what} (line {line})")
        else:
            more.add(why)
    if not groups:
        return None
    return "; ".join("it uses " + "; ".join(shown) + ("; ..." if why in more else "")
                     + f", and {why}" for why, shown in groups.items())


def imported_names(tree: ast.Module) -> set[str]:
    """The first part of every module ``tree`` imports, relative imports included."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom):  # from . import helper
            names.update(a.name for a in node.names)
    return names


def read(source: str | bytes, rule: Rule,
         own_modules: frozenset[str] = frozenset()) -> tuple[str | None, set[str]]:
    """``verdict`` and ``imported_names`` of ``source`` from one parse (no names where it
    does not parse). A MemoryError propagates: where the parse runs under a memory limit
    (``grader.sandbox.reader``), the caller tells that limit from the parser's own depth."""
    try:
        tree = parse(source)
    except RecursionError:
        return NESTED, set()
    if tree is None:
        return None, set()
    imports = imported_names(tree)
    try:
        return worded(findings(tree, rule, own_modules)), imports
    except RecursionError:
        return NESTED, imports
