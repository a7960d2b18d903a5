"""What a student does to hide a copy, each a function of the copied file's text and its
exercise: rename, reorder, re-comment, re-indent, split into helpers, all five at once, and
all five with every message reworded.

Each keeps the code working: the disguised copies of the answer key and of the five students of
``tests/similar/`` grade full marks as their sources do (checked when this was written:
``python -m grader grade`` on each). The names the exercise's contract fixes (the stub's own
words: functions, parameters, ``wq``...) are kept, as a copier who wants the points keeps them.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Callable

from submission_tools import STUBS


def contract_names(exercise: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", (STUBS / f"{exercise}.py").read_text()))


def rename(text: str, exercise: str) -> str:
    """Every name the file binds that the contract does not fix, renamed everywhere: its
    variables, parameters, helpers, classes, attributes and fields."""
    tree = ast.parse(text)
    keep = set(dir(builtins)) | {"self", "cls"} | contract_names(exercise)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            keep.update((a.asname or a.name).split(".")[0] for a in node.names)
    bound, attributes = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            attributes.add(node.attr)
        if isinstance(node, ast.ClassDef):  # methods and fields are reached as attributes
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.ClassDef)):
                    attributes.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    attributes.add(item.target.id)
    renamed: dict[str, str] = {}

    def new(name: str) -> str:
        if name in keep or name not in bound | attributes or name.startswith("__"):
            return name
        return renamed.setdefault(name, f"v{len(renamed)}_{name[::-1]}")

    functions = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    for node in ast.walk(tree):  # keywords first: a call to the file's own function
        callee = getattr(node, "func", None)
        if getattr(callee, "id", getattr(callee, "attr", None)) in functions:
            for argument in node.keywords:  # type: ignore[attr-defined]
                argument.arg = new(argument.arg) if argument.arg else None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            node.name = new(node.name)
        elif isinstance(node, ast.arg):
            node.arg = new(node.arg)
        elif isinstance(node, ast.Name):
            node.id = new(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in attributes:
            node.attr = new(node.attr)
    return ast.unparse(tree) + "\n"


def reorder(text: str, exercise: str) -> str:
    """The module's functions and classes, and each class's methods, in reverse order (a
    class's fields stay first, in their order: a dataclass's are its arguments)."""
    tree = ast.parse(text)

    def flip(body: list[ast.stmt]) -> list[ast.stmt]:
        moved = [n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        return [n for n in body if n not in moved] + moved[::-1]

    tree.body = flip(tree.body)
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            node.body = flip(node.body)
    return ast.unparse(tree) + "\n"


def recomment(text: str, exercise: str) -> str:
    """Every comment and docstring gone, other ones written in."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(
                body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            body[0].value.value = "My own notes on this part."
    lines = []
    for line in ast.unparse(tree).splitlines():
        code = line.lstrip()
        if code.startswith(("def ", "class ", "for ", "if ")):
            lines.append(line[:len(line) - len(code)] + "# here is what I do next")
        lines.append(line + ("  # and done" if code.startswith("return") else ""))
    return "\n".join(lines) + "\n"


def reindent(text: str, exercise: str) -> str:
    """Two spaces a level, blank lines between statements, arguments one per line."""
    lines = []
    for line in ast.unparse(ast.parse(text)).splitlines():
        code = line.lstrip()
        depth = (len(line) - len(code)) // 4
        if code.startswith("def ") and "," in code:
            code = code.replace(", ", ",\n" + "  " * (depth + 2))
        lines += ["  " * depth + code, ""]
    return "\n".join(lines) + "\n"


def split(text: str, exercise: str) -> str:
    """Every function of four statements or more cut in two: its first half moves into a
    helper (a method, for a method) that returns what the second half reads."""
    tree = ast.parse(text)
    members: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            members += [*_halves(node, method=False)]
        elif isinstance(node, ast.ClassDef):
            node.body = [part for item in node.body for part in (
                _halves(item, method=True) if isinstance(item, ast.FunctionDef) else [item])]
            members.append(node)
        else:
            members.append(node)
    tree.body = members
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _halves(function: ast.FunctionDef, method: bool) -> list[ast.stmt]:
    body = function.body
    start = 1 if body and isinstance(body[0], ast.Expr) and isinstance(
        body[0].value, ast.Constant) else 0
    own = body[start:]
    if len(own) < 4 or function.decorator_list:
        return [function]
    for cut in sorted(range(2, len(own) - 1), key=lambda i: abs(i - len(own) // 2)):
        first, rest = own[:cut], own[cut:]
        if any(isinstance(n, (ast.Return, ast.Yield, ast.Nonlocal))
               for s in first for n in ast.walk(s)):
            continue
        params = [a.arg for a in function.args.posonlyargs + function.args.args
                  + function.args.kwonlyargs]
        out = sorted(_bound(first) & {n.id for s in rest for n in ast.walk(s)
                                      if isinstance(n, ast.Name)})
        helper = ast.FunctionDef(
            name=f"{function.name.strip('_')}_first_steps",
            args=ast.arguments(posonlyargs=[], args=[ast.arg(p) for p in params],
                               kwonlyargs=[], kw_defaults=[], defaults=[]),
            body=first + [ast.Return(ast.Tuple([ast.Name(n, ast.Load()) for n in out],
                                               ast.Load()) if out else None)],
            decorator_list=[], returns=None, type_params=[])
        callee: ast.expr = (ast.Attribute(ast.Name(params[0], ast.Load()), helper.name,
                                          ast.Load()) if method
                            else ast.Name(helper.name, ast.Load()))
        call = ast.Call(callee, [ast.Name(p, ast.Load())
                                 for p in (params[1:] if method else params)], [])
        target = ast.Tuple([ast.Name(n, ast.Store()) for n in out], ast.Store())
        function.body = body[:start] + [ast.Assign([target], call) if out
                                        else ast.Expr(call)] + rest
        return [helper, function]
    return [function]


def _bound(statements: list[ast.stmt]) -> set[str]:
    """The names these statements bind in their own scope (comprehensions, lambdas and nested
    functions keep theirs)."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
                             ast.Lambda)):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for statement in statements:
        visit(statement)
    return names


def all_five(text: str, exercise: str) -> str:
    for step in (rename, split, reorder, recomment, reindent):
        text = step(text, exercise)
    return text


def reworded(text: str, exercise: str) -> str:
    """All five, and every message (every string of more than one word) in other words."""
    tree = ast.parse(all_five(text, exercise))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and " " in node.value:
            node.value = "in other words: " + node.value[::-1]
    return ast.unparse(tree) + "\n"


DISGUISES: dict[str, Callable[[str, str], str]] = {
    "renamed": rename, "reordered": reorder, "re-commented": recomment,
    "re-indented": reindent, "split into helpers": split, "all five": all_five,
    "all five, messages reworded": reworded}
