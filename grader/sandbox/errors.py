"""What a request to a worker ends in when it gives no value, as the grading process raises it:
``StudentError`` (the student's code raised, or returned something unusable), ``WorkerLost``
(the worker can answer no more: the exercise is over) and ``CallTimedOut`` (one call ran past
its own limit); and ``printable``, the one form in which student-made text (an error's type,
message and lines) is shown. Split from ``grader.sandbox.isolation``, whose ``Sandbox``
raises them.
"""

from __future__ import annotations

from typing import Any

# The bidirectional controls (embeddings and overrides U+202A-U+202E, isolates U+2066-U+2069)
# and marks (U+200E, U+200F, U+061C): invisible, they reorder the text around them, so a line
# could read as something it is not (Trojan Source, CVE-2021-42574).
BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
# What student text never carries into a report, each character as ``?``: the C0 controls but
# tab and line feed, DEL, the C1 controls (an escape sequence could redraw a terminal) and BIDI.
CONTROL = dict.fromkeys([*range(0, 9), *range(11, 32), 127, *range(128, 160), *BIDI], "?")


def printable(text: Any, cap: int) -> str:
    """Student-made text as it may be shown: one line (its line breaks as `` / ``, so it cannot
    pass for a line of a report), at most ``cap`` characters, no control character (an
    escape sequence cannot redraw the instructor's terminal, a bidirectional control cannot
    reorder what is read: ``CONTROL``), and nothing a UTF-8 file cannot hold (a lone
    surrogate is written as its escape)."""
    text = " / ".join(line.strip() for line in str(text).splitlines() if line.strip())
    text = (text[:cap] + " [...]" if len(text) > cap else text).translate(CONTROL)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class StudentError(Exception):
    """The student's code raised an exception (or returned something unusable)."""

    def __init__(self, info: dict[str, Any]):
        where = info.get("where")
        self.info = {**info, "type": printable(info.get("type"), 100),
                     "message": printable(info.get("message"), 1000),
                     "where": [printable(w, 300) for w in where[-3:]]
                     if isinstance(where, list) else []}
        super().__init__(f"{self.info['type']}: {self.info['message']}")

    @property
    def type(self) -> str:
        return str(self.info.get("type"))

    @property
    def is_value_error(self) -> bool:
        return bool(self.info.get("value_error"))

    @property
    def not_implemented(self) -> bool:
        return bool(self.info.get("not_implemented"))

    def describe(self) -> str:
        """``Type: message (at file line N, in f: code)``; ``Type (at ...)`` when the message is
        empty (a bare ``assert``)."""
        message = self.info.get("message")
        text = f"{self.info.get('type')}: {message}" if message else str(self.info.get("type"))
        where = self.info.get("where") or []
        if where:  # an error of autograd's engine: the forward line whose gradient failed
            how = "in the backward pass of" if self.info.get("backward") is True else "at"
            text += f" ({how} {where[-1]})"
        return text


class WorkerLost(BaseException):
    """The worker can answer no more; the exercise scores zero with ``reason``.

    A BaseException, so that Hypothesis stops at once instead of shrinking on it.
    """

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class CallTimedOut(WorkerLost):
    """One call ran past its own limit (``Limits.call``): the worker was stopped, and the
    check the call belongs to fails; the exercise goes on in a fresh worker. Its time is not
    the exercise's (``Limits.timeout``): each check meets its own stopped call."""

    again = False  # the same question was stopped before: stopped again unasked (``Student``)

