"""The source rule's bindings: what the names of one file are bound to, found before the scan
(``grader.core.delegation_scan``) judges it: the names the file binds itself, the modules its
imports and aliases bind (a library's by its dotted name, ``numpy.linalg``; the submission's
own as ``.helper``), the names bound to a library or a part of one (what an attribute store
may not change), and the places a module may stand as a value (an alias's right-hand side,
``hasattr``'s first argument). Like the scan, it imports only the standard library and the
rule: the reader is sent its source.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .delegation import DUNDERS, INSTALLED, Rule
from .delegation_names import MODULES, NAMES

OWN = "."  # how an own module's path starts among a name's modules (".helper", ".pkg.sub")


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


def chain_of(node: ast.expr) -> tuple[ast.expr, list[ast.Attribute]]:
    """The root of an attribute chain and its links, from the root out (``F.a.b``: F, [a, b])."""
    links = []
    while isinstance(node, ast.Attribute):
        links.append(node)
        node = node.value
    links.reverse()
    return node, links


@dataclass
class Bindings:
    """One file's names: ``bind`` walks its syntax tree once."""

    rule: Rule
    own: frozenset[str]  # own modules a file may import ("helper", "pkg", "pkg.sub")
    bound: set[str] = field(default_factory=set)  # names the file binds (not library imports)
    libraries: set[str] = field(default_factory=set)  # names bound to a library or its parts
    members: set[int] = field(default_factory=set)  # ids of class-body defs and targets
    helpers: set[str] = field(default_factory=set)  # names bound to the submission's modules
    aliases: dict[str, set[str]] = field(default_factory=dict)  # name -> modules it may be
    handles: set[int] = field(default_factory=set)  # ids of places a module may stand

    def own_import(self, node: ast.Import | ast.ImportFrom, name: str | None) -> bool:
        top = (name or "").split(".")[0]
        if isinstance(node, ast.ImportFrom) and node.level:
            return True
        return top in self.own and top not in INSTALLED

    def step(self, paths: set[str], attr: str) -> set[str]:
        """The modules ``path.attr`` is, for each module of ``paths`` (a library's submodule
        of ``MODULES``, an own module's of ``own``); none where it is not a module."""
        found = set()
        for path in paths:
            dotted = f"{path}.{attr}"
            if dotted.startswith(OWN) and dotted[1:] in self.own or dotted in MODULES:
                found.add(dotted)
        return found

    def modules_of(self, expr: ast.expr) -> set[str]:
        """The modules ``expr`` may be: a name bound to one, or a chain through modules to
        one (``torch.nn.functional``); none for anything else."""
        root, links = chain_of(expr)
        paths = set(self.aliases.get(root.id, ())) if isinstance(root, ast.Name) else set()
        for link in links:
            if not paths:
                break
            paths = self.step(paths, link.attr)
        return paths

    def member(self, path: str, attr: str) -> bool:
        """Whether a file may name ``attr`` of the library module ``path``."""
        return attr in NAMES.get(path, ()) or attr in DUNDERS or attr in self.rule.calls

    def imported(self, node: ast.Import | ast.ImportFrom) -> None:
        """The modules an import binds (``import numpy as np``: np is numpy;
        ``from torch import nn``: nn is torch.nn; ``from . import helper``: .helper)."""
        for alias in node.names:
            if isinstance(node, ast.Import):
                dotted = alias.name if alias.asname else alias.name.split(".")[0]
                name = alias.asname or dotted
            else:
                dotted = f"{node.module}.{alias.name}" if node.module else alias.name
                name = alias.asname or alias.name
            own = self.own_import(node, node.module if isinstance(node, ast.ImportFrom)
                                  else alias.name)
            if own:
                if dotted in self.own and (isinstance(node, ast.Import) or not node.level
                                           or node.level == 1):
                    self.aliases.setdefault(name, set()).add(OWN + dotted)
            elif dotted in MODULES and not (isinstance(node, ast.ImportFrom) and node.level):
                self.aliases.setdefault(name, set()).add(dotted)

    def bind(self, tree: ast.AST) -> None:
        sources: list[tuple[ast.expr, ast.expr | None]] = []
        renames: list[tuple[list[str], ast.expr]] = []  # F = torch.nn.functional
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
                self.imported(node)
                for alias in node.names:
                    name = alias.asname or alias.name.split(".")[0]
                    module = alias.name if isinstance(node, ast.Import) else node.module
                    own = self.own_import(node, module)
                    (self.bound if own else self.libraries).add(name)
                    if own:
                        self.helpers.add(name)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id == "hasattr" and node.args):
                self.handles.add(id(node.args[0]))  # hasattr(F, "scaled_dot_product_attention")
            if isinstance(node, ast.Assign):
                sources += [(target, node.value) for target in node.targets]
                if all(isinstance(t, ast.Name) and id(t) not in self.members
                       for t in node.targets):
                    renames.append(([t.id for t in node.targets], node.value))  # type: ignore
                    self.handles.add(id(node.value))
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
        if "hasattr" in self.bound:  # the file's own hasattr may hand back what it is given
            self.handles -= {id(node.args[0]) for node in ast.walk(tree)
                             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                             and node.func.id == "hasattr" and node.args}
        self.spread(sources)
        self.rename(renames)

    def rename(self, renames: list[tuple[list[str], ast.expr]]) -> None:
        """Add to ``aliases`` the modules each plain assignment binds (``F = torch.nn.functional``,
        ``G = F``), in any order of the lines: a worklist over names, each assignment taken up
        again only when the name its value starts from may be a module it was not."""
        waiting: dict[str, list[int]] = {}
        for i, (_, value) in enumerate(renames):
            root, _ = chain_of(value)
            if isinstance(root, ast.Name):
                waiting.setdefault(root.id, []).append(i)
        todo = list(self.aliases)
        while todo:
            for i in waiting.get(todo.pop(), ()):
                targets, value = renames[i]
                found = self.modules_of(value)
                for target in targets:
                    new = found - self.aliases.get(target, set())
                    if new:
                        self.aliases.setdefault(target, set()).update(new)
                        todo.append(target)

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

    @property
    def exports(self) -> list[str]:
        """The names the file binds to a module, which another file may not take from it."""
        return sorted(name for name, paths in self.aliases.items() if paths)
