"""The source rule's verdicts: a file's text parsed, scanned (``grader.core.delegation_scan``)
and what breaks its ``Rule`` (``grader.core.delegation``) worded, as a list of places
(``violations``), as the report's sentences (``verdict``), or, for the reader, as those
sentences with the modules the file imports, the modules it binds and the names it takes from
the submission's own, from one parse (``read``). Split from
``grader.core.delegation``; like it, it imports only the standard library (and the rule's
other modules): the reader is sent its source.
"""

from __future__ import annotations

import ast
from typing import Any

from .delegation import Rule
from .delegation_scan import WHAT_CAP, Finding, findings, scanned

NESTED = "it is nested too deeply for Python's parser (line 1)"


def parse(source: str | bytes) -> ast.Module | None:
    """The syntax tree of ``source``, a file's bytes read as the interpreter reads them (its
    coding line honoured), or None when it does not parse: the worker's import then says what
    is wrong. RecursionError and MemoryError (nested too deeply for the parser) propagate."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


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
         own_modules: frozenset[str] = frozenset()) -> dict[str, Any]:
    """What the reader sends of ``source``, from one parse: ``verdict``, ``imports``
    (``imported_names``), ``exports`` (the names it binds to a module, which no other file may
    take from it) and ``takes`` (``[own module, name, line, what]`` for each name it takes from
    one of the submission's modules), none of the last three where it does not parse. A
    MemoryError propagates: where the parse runs under a memory limit
    (``grader.sandbox.reader``), the caller tells that limit from the parser's own depth."""
    nothing: dict[str, Any] = {"verdict": None, "imports": set(), "exports": [], "takes": []}
    try:
        tree = parse(source)
    except RecursionError:
        return {**nothing, "verdict": NESTED}
    if tree is None:
        return nothing
    imports = imported_names(tree)
    try:
        scan = scanned(tree, rule, own_modules)
    except RecursionError:
        return {**nothing, "verdict": NESTED, "imports": imports}
    first: dict[tuple[str, str], list[Any]] = {}  # one place per name taken
    for module, name, line, what in scan.takes:
        first.setdefault((module, name), [module, name, line, what[:WHAT_CAP]])
    return {"verdict": worded(scan.found), "imports": imports, "exports": scan.exports,
            "takes": sorted(first.values(), key=lambda take: (take[2], take[0], take[1]))}
