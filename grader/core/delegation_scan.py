"""The source rule's scan: one file's syntax tree, walked once, each place that breaks its
``Rule`` found (``findings``). Split from ``grader.core.delegation``, which holds the rule it
applies; ``grader.core.delegation_verdicts`` words what it finds.

The scan costs time and memory in proportion to the file, however it is written: names bound
to a library through others are found with a worklist (``_Scan.spread``), each assignment
taken up once, not in a pass over the file per name; an attribute chain, a sum of strings and
a place's text are each worked out once, not once per link (tests/test_reader.py). Like the
rule, it imports only the standard library (and the rule): the reader is sent its source.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from .delegation import (
    BLOCKED,
    DUNDERS,
    FORBIDDEN,
    HANDLE,
    HOOKS,
    INSTALLED,
    INTERNAL,
    INTERNAL_PREFIXES,
    INTERNALS,
    PATCH,
    Rule,
)

Finding = tuple[int, int, str, str]  # line, column (where it ends), what, why
WHAT_CAP = 2000  # characters of a finding's "what" (a long string literal's repr, say)


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


def findings(tree: ast.Module, rule: Rule, own_modules: frozenset[str]) -> list[Finding]:
    """The places in ``tree`` that break ``rule``, in the order of the file."""
    scan = _Scan(rule, frozenset(own_modules) - set(rule.siblings))
    scan.bind(tree)
    scan.visit(tree)
    return sorted(scan.found)

