"""One pass: many calls asked of a worker in one request, each answered under its own limits
(``batch``), and what each printed kept apart (``Printed``), so that a report shows what the
calls a check read printed, where it read them, as if each had been asked alone.

``grader.core.one_pass`` decides what a pass asks (the course's plan) and serves its answers
to the checks; ``Sandbox.batch`` is this module's ``batch``.
"""

from __future__ import annotations

import os
import re
import time
from typing import IO, TYPE_CHECKING, Any

from . import protocol
from .errors import CallTimedOut, WorkerLost

if TYPE_CHECKING:
    from .isolation import Sandbox


def batch(sandbox: Sandbox, calls: list[dict[str, Any]], budget: int) -> list[tuple]:
    """Ask every one of ``calls`` (``{"op", "kwargs"}`` each, as ``Sandbox.request`` sends them)
    in one request: the worker answers them in turn, each reply a frame of its own, and each
    call is held to its own limits from the reply before it (``call_limit``), as it would be
    alone. Returns an outcome per call answered, in order: ``("frame", bytes, part)`` (what
    ``Sandbox.reread`` reads; ``part`` names what it printed, ``Printed``), then, where the
    pass stopped short, ``("stopped", why)`` for a call past its limit or ``("lost", why)`` for
    a worker that can answer no more. A pass that stops short leaves the worker to be started
    afresh on the next request; so does one whose replies pass ``budget`` bytes, which ends at
    the reply that passed it (kept: the calls after it are asked alone). Each call's clock
    starts as the reply before it is in, so the worker's time between the two (the grading
    process reading that reply) is no call's: at most the time to read one reply."""
    from .isolation import MALFORMED

    if sandbox.closed and sandbox._timed_out:
        sandbox._restart()
    if sandbox.closed or not calls:
        return []
    printed = sandbox.printed = sandbox.printed or Printed()
    start = began = time.monotonic()
    remaining = sandbox.limits.timeout - sandbox.used
    sandbox._sequence += 1
    number = sandbox._sequence
    sock = sandbox._sock
    outcomes: list[tuple] = []
    kept = 0
    try:
        sock.settimeout(max(remaining, 1e-3))
        mark = printed.size(sandbox._output)
        protocol.send(sock, {"op": "batch", "id": number, "kwargs": {"calls": calls}})
        cpu = sandbox._cpu() if sandbox.limits.call else None
        for part in range(len(calls)):
            def within(cpu: float | None = cpu, began: float = began) -> None:
                sandbox._within_call_limits(start + remaining, cpu, began)

            frame = protocol.recv_frame(sock, start + remaining, within)
            # The next call's clock starts as this reply's last byte is in, before it is read.
            ended, cpu = time.monotonic(), sandbox._cpu() if sandbox.limits.call else None
            reply = protocol.decode(frame)
            while sandbox._is_question(reply):  # a proxy asks: its time is the student's
                protocol.send(sock, {**sandbox.answer(reply), "id": number})
                frame = protocol.recv_frame(sock, start + remaining, within)
                ended, cpu = time.monotonic(), sandbox._cpu() if sandbox.limits.call else None
                reply = protocol.decode(frame)
            ident = reply.get("id") if isinstance(reply, dict) else None
            if not isinstance(ident, list) or len(ident) != 3 or ident[:2] != [number, part]:
                raise protocol.ProtocolError("not the reply asked for")
            if "fatal" in reply:
                sandbox.answered(reply)  # raises WorkerLost, the worker killed
            # Where the call's output ends, as the worker saw it (it may have gone on to the
            # next call since): within what is there, and not before the last call's end.
            said, end = ident[2], printed.size(sandbox._output)
            if type(said) is int and mark <= said <= end:
                end = said
            # Kept as bytes, decoded when a check reads it: decoded, a reply can hold many
            # times its bytes (an empty 64-dimensional array: 1.2 KB for 250 bytes).
            outcomes.append(("frame", frame, printed.part(mark, end)))
            mark = end
            began = ended
            kept += len(frame)
            if kept > budget and part + 1 < len(calls):
                # The pass ends here, this reply kept: the calls after it are asked alone, in
                # a fresh worker (this one may have answered some of them already: no answer
                # it gave is left unread and asked again of the same worker).
                sandbox.kill()
                sandbox._timed_out = True
                break
        else:
            if sandbox._pending():
                raise protocol.ProtocolError("a frame no call asked for")
    except CallTimedOut as error:
        outcomes.append(("stopped", error.reason))
    except WorkerLost as lost:
        outcomes.append(("lost", lost.reason))
    except TimeoutError:
        began = start + remaining
        sandbox.kill()
        outcomes.append(("lost", f"stopped after {sandbox.limits.timeout:g} s: the time limit "
                                 "for one exercise (an infinite loop, or very slow code?)"))
    except (EOFError, OSError):
        outcomes.append(("lost", sandbox._death_reason()))
    except (protocol.ProtocolError, ValueError, TypeError, OverflowError, RecursionError):
        sandbox.kill()
        outcomes.append(("lost", MALFORMED))
    finally:
        sandbox.used += began - start  # a stopped call's own time is not the exercise's
    if outcomes and outcomes[-1][0] == "lost":
        sandbox._lost = outcomes[-1][1]
        sandbox._timed_out = True  # the calls before it, asked again alone, get a fresh worker
    return outcomes


class Printed:
    """Where in a worker's captured output each call of a pass printed (its ``part``: a span
    of bytes), and where in the rest of it (what was printed outside any pass: loading, calls
    asked alone) a check read each part's answer first. ``assemble`` reads the capture back
    in that order: a part's bytes where its answer was first read, a part no check read left
    out, so the output is what asking each call alone, as the checks did, would have
    printed."""

    def __init__(self) -> None:
        self.spans: list[tuple[int, int]] = []  # each part's bytes in the capture
        self.shown: list[tuple[int, int]] = []  # (where in the rest, part), in reading order
        self.fresh: list[int] = []  # where in the rest a fresh worker began
        self._read: set[int] = set()
        self._taken = 0  # the spans' bytes, all told

    @staticmethod
    def size(capture: IO[bytes]) -> int:
        return os.fstat(capture.fileno()).st_size

    def part(self, start: int, end: int) -> int:
        self.spans.append((start, end))
        self._taken += end - start
        return len(self.spans) - 1

    def restarted(self, capture: IO[bytes]) -> None:
        """A fresh worker begins here: it prints its warnings anew."""
        self.fresh.append(self.size(capture) - self._taken)

    def read(self, part: int, capture: IO[bytes]) -> None:
        """A check read ``part``'s answer: its output goes here, the first time."""
        if part not in self._read:
            self._read.add(part)
            self.shown.append((self.size(capture) - self._taken, part))

    def assemble(self, capture: IO[bytes], cap: int) -> bytes:
        """The first ``cap`` bytes of the output in reading order, each warning once a worker
        (Python's default action, as calls asked one at a time print them: a pass's worker
        prints every call's, ``worker._warn_afresh``)."""
        pieces = self._pieces(capture, 4 * cap)
        out, seen = bytearray(), set()
        for fresh, piece in pieces:
            if fresh:
                seen = set()
            out += _once(piece, seen)
            if len(out) > cap:
                break
        return bytes(out[:cap + 1])

    def _pieces(self, capture: IO[bytes], cap: int) -> list[tuple[bool, bytes]]:
        """The output in reading order, as pieces, each saying whether a fresh worker begins
        with it."""
        rest, at = bytearray(), 0
        edges = sorted(self.spans)
        size = self.size(capture)
        for start, end in [*edges, (size, size)]:
            if start > at:
                capture.seek(at)
                rest += capture.read(min(start - at, cap + 1))
            at = max(at, end)
            if len(rest) > cap:
                break
        pieces: list[tuple[bool, bytes]] = []
        used, size = 0, 0
        marks = sorted([(where, 0, -1) for where in self.fresh]
                       + [(where, 1, part) for where, part in self.shown])
        for where, kind, part in marks:
            if size > cap:
                break
            pieces.append((False, bytes(rest[used:where])))
            used = max(used, where)
            if kind == 0:
                pieces.append((True, b""))
                continue
            start, end = self.spans[part]
            capture.seek(start)
            pieces.append((False, capture.read(min(end - start, cap + 1))))
            size += len(pieces[-1][1])
        pieces.append((False, bytes(rest[used:])))
        return pieces


# A warning as Python prints it: "file:line: Category: message", then its source line.
_WARNING = re.compile(rb"^[^\n]*:\d+: \w*Warning: [^\n]*\n(?:  [^\n]*\n)?", re.MULTILINE)


def _once(text: bytes, seen: set[bytes]) -> bytes:
    """``text`` with each warning already in ``seen`` left out (and each new one noted)."""
    out, at = bytearray(), 0
    for found in _WARNING.finditer(text):
        out += text[at:found.start()]
        at = found.end()
        first = found.group().split(b"\n", 1)[0]
        if first not in seen:
            seen.add(first)
            out += found.group()
    return bytes(out + text[at:])
