"""The source rule's scan: one file's syntax tree, walked once, each place that breaks its
``Rule`` found (``findings``). Split from ``grader.core.delegation``, which holds the rule it
applies; ``grader.core.delegation_verdicts`` words what it finds.

The scan costs time and memory in proportion to the file, however it is written: names bound
to a library through others are found with worklists (``Bindings.spread``, ``rename``), each
assignment taken up again only when a name it reads gains a meaning, not in a pass over the
file per name; an attribute chain, a sum of strings and a place's text are each worked out
once, not once per link (tests/test_reader.py). Like the rule, it imports only the standard
library (and the rule's modules): the reader is sent its source.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from .delegation import (
    DUNDERS,
    FAMILIES,
    FORBIDDEN,
    HANDLE,
    HOOKS,
    INTERNAL,
    INTERNAL_PREFIXES,
    INTERNALS,
    NAMES_WHY,
    PATCH,
    Rule,
)
from .delegation_bindings import HOLDERS, OWN, Bindings, _holds_library, _root, chain_of
from .delegation_names import MODULES

Finding = tuple[int, int, str, str]  # line, column (where it ends), what, why
Take = tuple[str, str, int, str]  # own module, the name taken from it, line, what
WHAT_CAP = 2000  # characters of a finding's "what" (a long string literal's repr, say)


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _internal(name: str) -> bool:
    return name in INTERNAL or name.startswith(INTERNAL_PREFIXES)


@dataclass
class _Scan(Bindings, ast.NodeVisitor):
    """One file's syntax tree: ``bind`` (``Bindings``) finds what its names are bound to, then
    the visit flags each place that breaks the rule, and keeps what the file takes from the
    submission's own modules (``takes``)."""

    found: list[Finding] = field(default_factory=list)
    takes: list[Take] = field(default_factory=list)
    through: set[int] = field(default_factory=set)  # ids of names read as ``name.attribute``
    links: dict[int, bool] = field(default_factory=dict)  # id of a link -> through a library
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

    # -- imports ------------------------------------------------------------------------------
    def module(self, node: ast.AST, dotted: str, what: str) -> bool:
        """Check an absolute import of ``dotted``; True when it may be imported."""
        top, *parts = dotted.split(".")
        why = (self.rule.why if top in self.rule.modules else
               self.rule.siblings_why if top in self.rule.siblings else
               self.rule.imports_why if top not in self.rule.imports else
               NAMES_WHY if any(".".join([top, *parts[:i + 1]]) not in MODULES
                                for i in range(len(parts))) else None)
        if why:
            self.flag(node, what, why)
        return why is None

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if not self.own_import(node, alias.name):
                self.module(node, alias.name, f"import {alias.name}")
            self.binding(node, alias.asname)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        names = ", ".join(a.name for a in node.names)
        what = f"from {'.' * node.level}{node.module or ''} import {names}"
        if "*" in names.split(", ") and (node.level or self.own_import(node, node.module)):
            self.flag(node, what, self.rule.imports_why)  # an own module's names, unseen
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
                one = f"from {node.module} import {alias.name}"
                if alias.name == "*":
                    self.flag(node, what, self.rule.imports_why)
                elif alias.name in self.rule.calls:
                    self.flag(node, one, self.rule.why)
                elif (f"{node.module}.{alias.name}" not in MODULES
                      and not self.member(node.module or "", alias.name)):
                    self.flag(node, one, NAMES_WHY)
        if node.module and self.own_import(node, node.module):  # what it takes from its own
            for alias in node.names:
                if f"{node.module}.{alias.name}" not in self.own and alias.name != "*":
                    self.takes.append((node.module.split(".")[0], alias.name, node.lineno,
                                       f"from {'.' * node.level}{node.module} import "
                                       f"{alias.name}"))
        for alias in node.names:
            self.binding(node, alias.asname)
        self.generic_visit(node)

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
        elif (isinstance(node.ctx, ast.Load) and self.aliases.get(node.id)
              and id(node) not in self.through and id(node) not in self.handles):
            self.flag(node, node.id, HANDLE)  # return torch; f(helper); (np, F)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr, store = node.attr, not isinstance(node.ctx, ast.Load)
        self.through.add(id(node.value))
        if id(node) not in self.links:  # the outermost link of its chain: walk it once
            self.chain(node)
        shown = self.texts.pop(id(node), None)
        if not self.links[id(node)]:  # a value's attribute: self.w, x.sum, helper.f
            if FAMILIES.search(attr):
                self.flag(node, f".{attr}", INTERNALS)
            elif store and attr.startswith("_"):
                self.binding(node, attr, f".{attr}")
            elif attr.startswith("_") and not self.readable(attr, node.value):
                self.flag(node, f".{attr}", INTERNALS)
        if attr in self.rule.calls and (attr not in self.bound or self.holds(node.value)):
            self.flag(node, shown or self.unparsed(node), self.rule.why)
        if store:
            self.patch(node)
        self.generic_visit(node)

    def chain(self, outer: ast.Attribute) -> None:
        """An attribute chain, from its outermost link: where it starts from a library's module,
        each link is a submodule of ``MODULES`` or a name the module's list holds, and the
        first that is neither refuses the chain, named in full (``numpy.testing.runstring``);
        where it starts from an own module, the first link past its modules is a name taken
        from it (``takes``). A chain that ends at a module must stand where a module may
        (``handles``). The links through a library are marked in ``links``, so that no value
        rule judges them a second time."""
        root, links = chain_of(outer)
        for link in links:
            self.links[id(link)] = False
        paths = set(self.aliases.get(root.id, ())) if isinstance(root, ast.Name) else set()
        for i, link in enumerate(links):
            if not paths:
                return
            ahead = self.step(paths, link.attr)
            for path in sorted(paths - {p.rsplit(".", 1)[0] for p in ahead}):
                if path.startswith(OWN):
                    self.takes.append((path[1:].split(".")[0], link.attr, link.lineno,
                                       self.unparsed(link)))
                    continue
                self.links[id(link)] = True
                if not self.member(path, link.attr):
                    for later in links[i:]:  # judged here, as a whole, not as values
                        self.links[id(later)] = True
                    if isinstance(outer.ctx, ast.Load):  # np.x = ... is a patch (``patch``)
                        rest = "".join(f".{later.attr}" for later in links[i + 1:])
                        self.flag(outer, f"{path}.{link.attr}{rest}", NAMES_WHY)
                    return
            if ahead and not any(p.startswith(OWN) for p in ahead):
                self.links[id(link)] = True
            paths = ahead
        if paths and isinstance(outer.ctx, ast.Load) and id(outer) not in self.handles:
            self.flag(outer, self.unparsed(outer), HANDLE)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        # hasattr(np, name) makes a module load name lazily (numpy's f2py, ctypeslib): the name
        # must be a string the module's list holds, as np.name would be
        if (isinstance(func, ast.Name) and func.id == "hasattr" and "hasattr" not in self.bound
                and len(node.args) == 2 and isinstance(node.args[0], ast.Name)):
            paths = set(self.aliases.get(node.args[0].id, ()))
            name = node.args[1]
            for path in sorted(p for p in paths if not p.startswith(OWN)):
                if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                    self.flag(node, f"hasattr({path}, ...)", NAMES_WHY)
                elif not self.step({path}, name.value) and not self.member(path, name.value):
                    self.flag(node, f"{path}.{name.value}", NAMES_WHY)
        # a format string reads the attributes and items its fields name, by a string: only a
        # literal, whose fields the rule reads (visit_Constant), may be one
        if (isinstance(func, ast.Attribute) and func.attr in ("format", "format_map")
                and not (isinstance(func.value, ast.Constant)
                         and isinstance(func.value.value, str))):
            self.flag(node, f"{self.unparsed(func)}(...) of a string built at run time",
                      INTERNALS)
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

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for stmt in node.body:  # class C: import numpy as np (C.np: a module handed around)
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self.flag(stmt, ast.unparse(stmt)[:WHAT_CAP + 1], HANDLE)
        self.visit_FunctionDef(node)

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
            if FAMILIES.search(attr) or (attr.startswith("_") and not self.readable(attr)):
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


def scanned(tree: ast.Module, rule: Rule, own_modules: frozenset[str]) -> _Scan:
    """``tree`` scanned: its ``found`` (in the order of the file), ``takes`` and ``exports``."""
    scan = _Scan(rule, frozenset(own_modules) - set(rule.siblings))
    scan.bind(tree)
    scan.visit(tree)
    scan.found.sort()
    return scan


def findings(tree: ast.Module, rule: Rule, own_modules: frozenset[str]) -> list[Finding]:
    """The places in ``tree`` that break ``rule``, in the order of the file."""
    return scanned(tree, rule, own_modules).found

