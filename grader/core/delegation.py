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


def violations(source: str, rule: Rule) -> list[str]:
    """The places in ``source`` that break ``rule`` (empty when it keeps it, or when it does
    not parse: the worker's import then says what is wrong with it)."""
    if not (rule.modules or rule.calls or rule.siblings):
        return []
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    finder = _Finder(rule)
    finder.visit(tree)
    return finder.found


def describe(found: list[str], rule: Rule) -> str:
    shown = "; ".join(found[:3]) + ("; ..." if len(found) > 3 else "")
    return f"it uses {shown}, and {rule.why}"
