"""Text a student controls, made inert wherever the kit writes it.

Folder names, file contents, exception messages and printed output come from the students. In
the kit's files they are data, never markup, formulas or the report's own lines, and no
character in them redraws a terminal or reorders what is read (``CONTROL``: the control
characters and the bidirectional controls, each shown as ``?``). One function per output:

- ``text``: any string as valid Unicode (a lone surrogate, which no UTF-8 file can hold,
  becomes its ``\\udXXX`` escape), so writing it never fails;
- ``plain``: a terminal, Gradescope's results, nbgrader's cell outputs (``CONTROL``);
- ``name``: a folder name as one line of text, one to one: a byte that is not UTF-8 as
  ``\\xNN``, a character that does not print as ``\\uNNNN``, a backslash doubled, so two
  folders never share a name;
- ``csv_cell``: one formula guard for every cell of every CSV the kit writes (``csv_text``
  reads it back);
- ``markdown``: a table cell or list item of ``summary.md`` (no HTML, no Markdown syntax, no
  link GitHub would make of a bare URL);
- ``html``: text in an HTML page or attribute;
- ``fenced``: printed output, each line behind a bar, so none passes for the report's own.
"""

from __future__ import annotations

import html as _html
import os
import re
from typing import Any

from ...sandbox.errors import CONTROL

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")
NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?")
MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~]|^#)")
# What GitHub-flavoured Markdown makes a link of, bare: ``scheme://`` (its colon escaped) and
# ``www.`` (its dot escaped). An escaped character shows as itself, and no link starts there.
AUTOLINK = re.compile(r"(?<=[A-Za-z0-9])(:)(?=//)|(?<![A-Za-z0-9])(www)(\.)", re.IGNORECASE)
FENCE = "  | "
CSV_CONTROL = {k: v for k, v in CONTROL.items() if k not in (9, 13)}  # a cell's own \t, \r


def text(value: Any) -> str:
    """``value`` as a string any UTF-8 file can hold (lone surrogates escaped)."""
    value = str(value)
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")


def plain(value: Any) -> str:
    """``value`` as plain text shows it: lines and tabs kept, every other control character
    and every bidirectional control as ``?`` (``CONTROL``), lone surrogates escaped."""
    return text(value).translate(CONTROL)


def name(folder: str) -> str:
    """A folder name (as ``os.listdir`` gives it) as one line of text: the same name for the
    same folder, different names for different folders. A byte that is not UTF-8 becomes
    ``\\xNN``, a character that does not print ``\\uNNNN`` (``\\UNNNNNNNN`` past U+FFFF),
    and a backslash is doubled, so no name can spell another's escape."""
    raw = os.fsencode(folder)
    if b"\\" not in raw and _utf8(raw) and folder.isprintable():
        return folder
    text = raw.decode("utf-8", "surrogateescape")
    out = []
    for c in text:
        if c == "\\":
            out.append("\\\\")
        elif 0xDC80 <= ord(c) <= 0xDCFF:  # a byte that is not UTF-8
            out.append(f"\\x{ord(c) - 0xDC00:02x}")
        elif not c.isprintable():
            out.append(f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
        else:
            out.append(c)
    return "".join(out)


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def csv_cell(value: Any) -> str:
    """A CSV cell a spreadsheet shows as text: one that starts like a formula (``=``, ``+``,
    ``-``, ``@``, a tab or a line break) gets a leading apostrophe, unless it is a plain
    number."""
    cell = text("" if value is None else value).translate(CSV_CONTROL)
    # A carriage return is a line break to a CSV reader but not to the writer (its line ends
    # are "\n"), which leaves it unquoted: as a line feed it is quoted, and the row stays one.
    cell = cell.replace("\r\n", "\n").replace("\r", "\n")
    if (cell[:1] in FORMULA_STARTS and not NUMBER.fullmatch(cell)) or cell[:1] == "'":
        return "'" + cell  # an apostrophe of its own is doubled: csv_text reads either back
    return cell


def csv_text(cell: str) -> str:
    """What ``csv_cell`` was given, from what it wrote (the kit reading its own CSVs)."""
    return cell[1:] if cell[:1] == "'" else cell


def csv_row(cells: list[Any]) -> list[str]:
    return [csv_cell(c) for c in cells]


def markdown(value: Any) -> str:
    """One line of Markdown that shows ``value`` as it is: HTML's ``& < >`` as entities, what
    could start emphasis, code, a link or a table cell backslash-escaped, and so is what
    GitHub would make a link of (``https\\://``, ``www\\.``), line breaks as spaces, control
    characters as ``?`` (the rest of the punctuation stays readable as plain text). An email
    address still shows as a ``mailto:`` link on GitHub (no escape stops that): it reads as
    the address it opens."""
    cell = text(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    cell = re.sub(r"[\r\n]+", " ", cell).translate(CONTROL)
    cell = MARKDOWN_SPECIAL.sub(r"\\\1", cell)
    return AUTOLINK.sub(lambda m: "\\:" if m[1] else m[2] + "\\.", cell)


def html(value: Any) -> str:
    """``value`` as text in HTML, in an element or a quoted attribute: ``& < > " '`` as
    entities, control characters as ``?`` (``plain``)."""
    return _html.escape(plain(value), quote=True)


def fenced(output: str) -> list[str]:
    """Printed output as report lines, each behind ``FENCE``: nothing in it starts a line."""
    return [FENCE + line for line in plain(output).rstrip().splitlines()]


def one_line(value: Any) -> str:
    """Student text shown inside one line of a report (a status, a table cell)."""
    return re.sub(r"\s*[\r\n]+\s*", " / ", text(value).strip()).translate(CONTROL)
