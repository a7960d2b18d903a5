"""A file's own code: its statements, less what the exercise's contract dictates, each written
in one canonical form, so that what a copier changes (names, comments, layout, order,
helpers) leaves it as it was, and what a second author writes differently does not.

1. The file is parsed, and each statement (a compound one by its header alone: ``if ...:``,
   ``def ...(...):``) is written back by ``ast.unparse``: brackets, quotes, line breaks and
   spacing become the same for every author.
2. The contract goes: docstrings and every other bare string, imports, the headers of the
   functions and classes the stub defines, every statement the stub holds itself
   (``super().__init__()``, the untouched ``raise NotImplementedError``), and the statements
   whose value the stub's docstrings quote as code (``nn.Linear(d_model, d_model,
   bias=bias)``, ``np.result_type(logits.dtype, np.float32)``, ``D = C // H``).
3. Each statement becomes tokens: a name is ``V`` whatever it is called (a variable, a
   parameter, a function, a module, a keyword argument), and so is an attribute the file makes
   itself (``self.n_head``, its classes' methods); keywords, builtins, numbers, operators and
   the attributes the file does not make (``np.exp``, ``x.shape``) stay as written; a string is
   ``S`` and a short digest of its words (an f-string's without its fields), so a message
   written word for word by two files is one token.

Two files then share a statement when they hold the same tokens; a statement held twice counts
twice. A file that does not parse is cut into statements at its lines, each read as above where
it parses alone, so it is compared too. Nothing here runs the student's code or imports it.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import hashlib
import keyword
import re
from collections import Counter
from dataclasses import dataclass, field

BUILTINS = frozenset(dir(builtins))
QUOTED = re.compile(r"``([^`]+)``")  # code a docstring quotes
_STRING = "|".join([r"'''(?:\\.|[^\\])*?'''", r'"""(?:\\.|[^\\])*?"""',  # triple-quoted first
                    r"'(?:\\.|[^\\'\n])*'", r'"(?:\\.|[^\\"\n])*"'])
TOKEN = re.compile(
    rf"""(?P<comment>\#[^\n]*)
    |(?P<string>(?i:[rbuf]{{0,2}})(?:{_STRING}))
    |(?P<number>0[xXoObB][\da-fA-F_]+|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?[jJ]?)
    |(?P<name>[^\W\d]\w*)
    |(?P<newline>\n)
    |(?P<op>\*\*=?|//=?|>>=?|<<=?|->|:=|\.\.\.|[-+*/%@&|^=<>!]=|[-+*/%@&|^~<>=.,:;()\[\]{{}}])
    |(?P<other>\\\n|[ \t\r\f]+|.)""", re.S | re.X)
COMPOUND = frozenset({"if", "elif", "else", "for", "while", "def", "class", "with", "try",
                      "except", "finally", "async", "match", "case"})
OPEN, CLOSE = frozenset("([{"), frozenset(")]}")
MAX_STATEMENTS = 2000  # a file is read up to this many statements (a solution holds 20 to 200)


@dataclass(frozen=True)
class Token:
    kind: str  # comment, string, number, name, newline, op or other
    text: str
    start: int  # character offsets in the text it was read from
    end: int


def lex(text: str) -> list[Token]:
    """Python's tokens, read by one regular expression: it never fails, whatever the text."""
    return [Token(m.lastgroup or "other", m.group(), m.start(), m.end())
            for m in TOKEN.finditer(text)]


@dataclass(frozen=True)
class Statement:
    key: str  # the normalised tokens, space-separated
    weight: int  # how many tokens
    spans: tuple[tuple[int, int], ...]  # where it lies in the file (characters), comments aside


@dataclass(frozen=True)
class Contract:
    """What the stub of an exercise dictates to every file."""

    keys: frozenset[str] = frozenset()  # the stub's own statements, normalised
    names: frozenset[str] = frozenset()  # its functions and classes: their headers are given
    quoted: frozenset[str] = frozenset()  # the expressions its docstrings quote, normalised


@dataclass
class Fingerprint:
    """A file's own statements (``statements``) and, for the comparison, each one numbered by
    its occurrence (``items``: the second ``x = np.asarray(x)`` is another item)."""

    text: str
    statements: list[Statement]
    items: list[tuple[str, int]] = field(init=False)

    def __post_init__(self) -> None:
        seen: Counter[str] = Counter()
        self.items = []
        for s in self.statements:
            seen[s.key] += 1
            self.items.append((s.key, seen[s.key]))

    @property
    def tokens(self) -> int:
        """How much code of its own the file holds, in tokens."""
        return sum(s.weight for s in self.statements)


def contract(stub: str) -> Contract:
    """The contract of an exercise, read from its stub."""
    own = fingerprint(stub, Contract())
    try:
        tree = ast.parse(stub)
    except SyntaxError:
        return Contract(frozenset(s.key for s in own.statements))
    names = frozenset(n.name for n in ast.walk(tree)
                      if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
    quoted = set()
    for code in QUOTED.findall(stub):
        try:
            body = ast.parse(code.strip()).body
        except SyntaxError:
            continue
        if len(body) == 1 and isinstance(body[0], (ast.Assign, ast.Expr)):
            value = body[0].value
            if not isinstance(value, (ast.Name, ast.Constant, ast.Attribute)) and not (
                    isinstance(value, ast.Tuple)
                    and all(isinstance(e, ast.Name) for e in value.elts)):
                quoted.add(_key(ast.unparse(value), frozenset()))
    return Contract(frozenset(s.key for s in own.statements), names, frozenset(quoted))


def fingerprint(text: str, given: Contract) -> Fingerprint:
    """``text``'s own statements, in order, ``given``'s contract left out."""
    try:
        tree = ast.parse(text)
        found: list[Statement] = []
        _walk(tree.body, _Source(text), given, _attributes(tree), found)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # too deep to write back too
        found = _by_lines(text, given)
    return Fingerprint(text, found)


# -- normalising ------------------------------------------------------------------------------
def _normalise(tokens: list[Token], attributes: frozenset[str]) -> list[str]:
    out: list[str] = []
    after_dot = False
    for t in tokens:
        if t.kind == "name":
            plain = keyword.iskeyword(t.text) or t.text in BUILTINS or (
                after_dot and t.text not in attributes)  # np.exp, x.shape: not the file's
            out.append(t.text if plain else "V")
        elif t.kind == "string":
            out.append("S" + _words(t.text))
        elif t.kind in ("number", "op"):
            out.append(t.text)
        else:
            continue
        after_dot = t.text == "." and t.kind == "op"
    return out


def _key(code: str, attributes: frozenset[str]) -> str:
    return " ".join(_normalise(lex(code), attributes))


def _words(literal: str) -> str:
    """A short digest of a string literal's words: case, spacing and an f-string's fields
    aside."""
    prefix = re.match(r"[a-zA-Z]*", literal)
    letters = prefix.group().lower() if prefix else ""
    body = literal[len(letters):].strip("'\"")
    if "f" in letters:
        body = re.sub(r"\{[^{}]*\}", "{}", body)
    words = " ".join(body.lower().split())
    return hashlib.blake2b(words.encode("utf-8", "surrogatepass"), digest_size=3).hexdigest()


def _attributes(tree: ast.AST) -> frozenset[str]:
    """The attributes the file makes itself (``self.wq = ...``, its classes' methods and
    fields): what a copier may rename behind a dot."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(item.name)
                for target in getattr(item, "targets", [getattr(item, "target", None)]):
                    if isinstance(target, ast.Name):
                        names.add(target.id)
    return frozenset(names)


# -- statements of a file that parses ---------------------------------------------------------
class _Source:
    """Character offsets of the positions ``ast`` gives (lines, and columns in UTF-8 bytes),
    and the file's tokens: where a header's colon is, and the comments a mark leaves out."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))
        self.tokens = [t for t in lex(text) if t.kind in ("op", "comment")]
        self.token_starts = [t.start for t in self.tokens]

    def offset(self, line: int, column: int) -> int:
        if line - 1 >= len(self.lines):
            return len(self.text)
        head = self.lines[line - 1].encode("utf-8", "surrogatepass")[:column]
        return self.starts[line - 1] + len(head.decode("utf-8", "replace"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.offset(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def header(self, node: ast.AST) -> tuple[int, int]:
        """A compound statement's header: from its keyword to the colon that ends it."""
        start = self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        depth = 0
        for t in self.tokens[bisect.bisect_left(self.token_starts, start):]:
            if t.kind == "op":
                depth += (t.text in OPEN) - (t.text in CLOSE)
                if t.text == ":" and depth == 0:
                    return start, t.end
        return start, start

    def marks(self, start: int, end: int) -> tuple[tuple[int, int], ...]:
        """``[start, end)`` less the comments inside it."""
        out, at = [], start
        for t in self.tokens[bisect.bisect_left(self.token_starts, start):]:
            if t.start >= end:
                break
            if t.kind == "comment":
                out.append((at, t.start))
                at = t.end
        out.append((at, end))
        return tuple((a, b) for a, b in out if b > a)


def _header(node: ast.AST) -> str | None:
    """A compound statement's header, written back canonically; None for a simple one."""
    u = ast.unparse
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        returns = f" -> {u(node.returns)}" if node.returns else ""
        return f"def {node.name}({u(node.args)}){returns}:"
    if isinstance(node, ast.ClassDef):
        return f"class {node.name}({', '.join(u(b) for b in [*node.bases, *node.keywords])}):"
    if isinstance(node, ast.If):
        return f"if {u(node.test)}:"
    if isinstance(node, ast.While):
        return f"while {u(node.test)}:"
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return f"for {u(node.target)} in {u(node.iter)}:"
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return f"with {', '.join(u(i) for i in node.items)}:"
    if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
        return "try:"
    if isinstance(node, ast.ExceptHandler):
        kind = f" {u(node.type)}" if node.type else ""
        return f"except{kind}{f' as {node.name}' if node.name else ''}:"
    if isinstance(node, ast.Match):
        return f"match {u(node.subject)}:"
    return None


def _inside(node: ast.AST) -> list[ast.AST]:
    out: list[ast.AST] = []
    for name in ("body", "orelse", "finalbody", "handlers"):
        out += getattr(node, name, None) or []
    for case in getattr(node, "cases", None) or []:
        out += case.body
    return out


def _walk(body: list[ast.AST], source: _Source, given: Contract, attributes: frozenset[str],
          found: list[Statement]) -> None:
    for node in body:
        if len(found) >= MAX_STATEMENTS:
            return
        _one(node, source, given, attributes, found)
        if _header(node) is not None:
            _walk(_inside(node), source, given, attributes, found)


def _one(node: ast.AST, source: _Source, given: Contract, attributes: frozenset[str],
         found: list[Statement], span: tuple[int, int] | None = None) -> None:
    """``node`` as one statement (a compound one by its header), unless the contract gives it."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(
            node.value.value, str):
        return  # a docstring, or a string standing as a comment
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return
    header = _header(node)
    if header is not None:
        if getattr(node, "name", None) in given.names and not isinstance(
                node, ast.ExceptHandler):
            return  # the signature of a function or class the stub defines
        code, where = header, span or source.header(node)
    else:
        value = getattr(node, "value", None)
        if isinstance(value, ast.AST) and _key(ast.unparse(value), attributes) in given.quoted:
            return
        code, where = ast.unparse(node), span or source.span(node)
    tokens = _normalise(lex(code), attributes)
    key = " ".join(tokens)
    if tokens and key not in given.keys:
        found.append(Statement(key, len(tokens), source.marks(*where)))


# -- statements of a file that does not parse -------------------------------------------------
def _by_lines(text: str, given: Contract) -> list[Statement]:
    """Statements cut at the line breaks outside brackets, and at the colon ending a compound
    statement's header; each that parses on its own is read as in a file that parses, the
    others as their tokens."""
    source = _Source(text)
    pieces = [(piece, _parse_one(text[piece[0].start:piece[-1].end]))
              for piece in _pieces(text)[:MAX_STATEMENTS]]
    attributes = frozenset().union(*(_attributes(node) for _, node in pieces
                                     if node is not None))
    found: list[Statement] = []
    for piece, node in pieces:
        span = (piece[0].start, piece[-1].end)
        if node is not None:
            try:
                _one(node, source, given, attributes, found, span)
                continue
            except RecursionError:  # a statement too deep to write back: its tokens
                pass
        if not _contract_line(piece, given):
            tokens = _normalise(piece, attributes)
            if tokens and " ".join(tokens) not in given.keys:
                found.append(Statement(" ".join(tokens), len(tokens), source.marks(*span)))
    return found


def _pieces(text: str) -> list[list[Token]]:
    """The tokens of each statement, comments aside: cut at line breaks outside brackets,
    at ``;``, and at the colon that ends a compound statement's header."""
    pieces: list[list[Token]] = []
    current: list[Token] = []
    depth = 0
    for t in lex(text):
        if t.kind == "newline" and depth == 0:
            pieces.append(current)
            current = []
        elif t.kind not in ("newline", "other", "comment"):
            if t.kind == "op":
                depth = max(depth + (t.text in OPEN) - (t.text in CLOSE), 0)
            if depth == 0 and t.kind == "op" and t.text == ";":
                pieces.append(current)
                current = []
                continue
            current.append(t)
            if depth == 0 and t.text == ":" and current[0].text in COMPOUND and all(
                    c.text != "lambda" for c in current):
                pieces.append(current)
                current = []
    pieces.append(current)
    return [p for p in pieces if p]


def _parse_one(code: str) -> ast.AST | None:
    """One statement of a file that does not parse, parsed alone (a header with an empty
    body); None where it does not parse either."""
    first = code.split(None, 1)[0].rstrip(":")
    if first in ("else", "finally"):
        return None
    if first == "elif":
        code = "if" + code[4:]
    if code.endswith(":"):
        code = (f"try:\n pass\n{code}\n pass" if first == "except" else f"{code}\n pass")
    try:
        body = ast.parse(code).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if len(body) != 1:
        return None
    return body[0].handlers[0] if first == "except" else body[0]  # type: ignore[attr-defined]


def _contract_line(code: list[Token], given: Contract) -> bool:
    first = code[0]
    if first.kind == "string" and len(code) == 1:
        return True  # a docstring
    if first.kind == "name" and first.text in ("import", "from"):
        return True
    return (first.text in ("def", "class") and len(code) > 1 and code[1].text in given.names)
