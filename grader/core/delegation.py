"""Library delegation: what an exercise's own file may not hand its work to.

Each exercise declares its ``Rule`` (``Exercise(..., rule=...)``): NumPy exercises may not use
torch, scipy, jax or tensorflow; the attention modules may not call the library's attention
(``nn.MultiheadAttention``, ``F.multi_head_attention_forward``,
``F.scaled_dot_product_attention``), nor a stand-in of the kit that does it for them.

The rule is enforced twice. Here, statically, on the submitted file's syntax tree before any of
it runs (imports, attribute names, names fetched by string); and in the worker, at run time,
for whatever the source hides (``grader.sandbox.worker``: an import hook and a torch function
mode that look for the student's own frames on the stack). Either way the exercise scores 0
and the report names the call. Correct code that imports NumPy the usual ways is never flagged.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

SCIENTIFIC = ("torch", "scipy", "jax", "jaxlib", "tensorflow")
ATTENTION_CALLS = ("scaled_dot_product_attention", "multi_head_attention_forward",
                   "MultiheadAttention", "_native_multi_head_attention")
# Fetching a module or an attribute by a string: the string is then what is looked at.
BY_NAME = ("__import__", "import_module", "getattr", "get", "find_spec", "load_module")
# Every exercise's file, whatever its rule: no way around the rule or the worker's guard.
# Code that does an exercise needs none of these; code that hides what it calls does.
INTERNAL_MODULES = ("importlib", "ctypes", "gc", "inspect", "pydoc", "threading", "_thread",
                    "multiprocessing", "concurrent", "runpy", "code", "codeop", "marshal",
                    "_ctypes", "cffi")
INTERNAL_CALLS = ("exec", "eval", "compile", "__import__", "vars", "globals", "locals",
                  "breakpoint", "setattr", "delattr")
INTERNAL_ATTRIBUTES = ("__globals__", "__builtins__", "__subclasses__", "__code__",
                       "__closure__", "__dict__", "__mro__", "__bases__", "__base__",
                       "__getattribute__", "__loader__", "__spec__", "__import__", "f_globals",
                       "f_locals", "f_back", "f_builtins", "gi_frame", "cr_frame", "tb_frame",
                       "co_code", "_getframe", "_C", "DisableTorchFunction",
                       "_disable_torch_function", "__torch_function__", "__torch_dispatch__",
                       "settrace", "setprofile", "addaudithook", "modules")
INTERNALS = "an exercise's file may not reach into Python's or torch's internals (exec, " \
            "eval, compile, importlib, sys.modules, ctypes, gc, inspect, threads, frames, " \
            "__dict__)"


@dataclass(frozen=True)
class Rule:
    modules: tuple[str, ...] = ()  # top-level packages the file may not use at all
    calls: tuple[str, ...] = ()  # functions or classes (by name) it may not call
    siblings: tuple[str, ...] = ()  # other exercises it may not import
    why: str = ""  # the sentence the report gives

    def as_config(self) -> dict[str, Any]:
        return {"modules": list(self.modules), "calls": list(self.calls),
                "siblings": list(self.siblings), "why": self.why}


NUMPY_RULE = Rule(modules=SCIENTIFIC,
                  why="a NumPy exercise may not use torch, scipy, jax or tensorflow")
ATTENTION_RULE = Rule(calls=ATTENTION_CALLS,
                      why="the exercise is to write attention, so it may not call "
                          "nn.MultiheadAttention, F.multi_head_attention_forward or "
                          "F.scaled_dot_product_attention")


@dataclass
class _Finder(ast.NodeVisitor):
    rule: Rule
    found: list[str] = field(default_factory=list)
    libraries: set[str] = field(default_factory=set)  # names bound to torch and its parts

    def _flag(self, node: ast.AST, what: str) -> None:
        self.found.append(f"{what} (line {getattr(node, 'lineno', '?')})")

    def _module(self, name: str | None) -> bool:
        return bool(name) and name.split(".")[0] in self.rule.modules

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] == "torch":
                self.libraries.add(alias.asname or alias.name.split(".")[0])
            if self._module(alias.name):
                self._flag(node, f"import {alias.name}")
            if alias.name.split(".")[0] in self.rule.siblings:
                self._flag(node, f"import {alias.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and self._module(node.module):
            self._flag(node, f"from {node.module} import ...")
        if node.level == 0 and (node.module or "").split(".")[0] == "torch":
            self.libraries.update(a.asname or a.name for a in node.names)
        if node.module and node.module.split(".")[0] in self.rule.siblings:
            self._flag(node, f"from {'.' * node.level}{node.module} import ...")
        for alias in node.names:
            if alias.name in self.rule.calls and node.level == 0:
                self._flag(node, f"from {node.module} import {alias.name}")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if (node.attr in self.rule.calls and isinstance(root, ast.Name)
                and root.id in self.libraries):
            self._flag(node, ast.unparse(node))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
            node.func, "id", "")
        if name in BY_NAME:
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                self._by_string(arg, node)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self._by_string(node.slice, node)  # sys.modules["torch"], vars(F)["..."]
        self.generic_visit(node)

    def _by_string(self, arg: ast.AST, node: ast.AST) -> None:
        for inner in ast.walk(arg):
            if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                text = inner.value
                if self._module(text) or text in self.rule.calls or (
                        text.split(".")[0] in self.rule.siblings):
                    self._flag(node, f"{ast.unparse(node)}")


class _Internals(ast.NodeVisitor):
    """What no exercise's file needs: the ways around the rule and the worker's guard."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def _flag(self, node: ast.AST, what: str) -> None:
        self.found.append(f"{what} (line {getattr(node, 'lineno', '?')})")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] in INTERNAL_MODULES:
                self._flag(node, f"import {alias.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and (node.module or "").split(".")[0] in INTERNAL_MODULES:
            self._flag(node, f"from {node.module} import ...")
        for alias in node.names:
            if alias.name in INTERNAL_ATTRIBUTES or alias.name in INTERNAL_CALLS:
                self._flag(node, f"from {node.module} import {alias.name}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in INTERNAL_CALLS:
            self._flag(node, f"{node.func.id}()")
        if isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            name = node.args[1] if len(node.args) >= 2 else None
            if not isinstance(name, ast.Constant):
                self._flag(node, f"{node.func.id}() with a computed name")
            elif name.value in INTERNAL_ATTRIBUTES:
                self._flag(node, f"{node.func.id}(..., {name.value!r})")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in ("__builtins__", "__loader__", "__spec__"):
            self._flag(node, node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in INTERNAL_ATTRIBUTES:
            self._flag(node, f".{node.attr}")
        self.generic_visit(node)


def _findings(source: str, rule: Rule) -> tuple[list[str], str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return [], ""
    internals = _Internals()
    internals.visit(tree)
    if internals.found:
        return internals.found, INTERNALS
    if not (rule.modules or rule.calls or rule.siblings):
        return [], ""
    finder = _Finder(rule)
    finder.visit(tree)
    return finder.found, rule.why


def violations(source: str, rule: Rule) -> list[str]:
    """The places in ``source`` that break ``rule`` or reach into internals (empty when it
    keeps to both, or when it does not parse: the worker's import then says what is wrong)."""
    return _findings(source, rule)[0]


def verdict(source: str, rule: Rule) -> str | None:
    """Why ``source`` may not be graded (the calls and lines, and the rule), or None."""
    found, why = _findings(source, rule)
    if not found:
        return None
    shown = "; ".join(found[:3]) + ("; ..." if len(found) > 3 else "")
    return f"it uses {shown}, and {why}"
