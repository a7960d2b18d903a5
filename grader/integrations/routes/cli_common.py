"""What several commands share: the limits' options and what a grading run says of its
isolation (grader/integrations/routes/cli.py and class_commands.py)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ...sandbox.call_limit import CALL_WALL, SHRINK_STOPS
from ...sandbox.isolation import TORCH_CALLS, GiB, Limits


def limits_of(args: argparse.Namespace) -> Limits:
    return Limits(timeout=args.timeout, memory=int(args.memory * GiB), call=args.call_timeout)


def isolation_note(found: Any, trusted: bool = False) -> str:
    """The lines a report ends with where the workers had less than root's isolation, or
    another user's processes run here (none where neither): what held, who else runs here
    (``node.NodeIsolation.line``), and what a worker went without."""
    from ...sandbox import cgroups

    label = found.line(trusted)
    if not label:
        return ""
    lines = [f"Isolation: {label}"]
    if not found.namespaces:
        lines.append("  - files: no namespaces, so the code could read the answer key and "
                     "anything else this user can (grade only code you trust this way)")
    lines += [f"  - {line}" for line in cgroups.missing_limits()]
    return "\n".join(lines)


def isolated(found: Any, trusted: bool) -> bool:
    """Whether untrusted submissions may be graded here (or ``trusted`` says they are all
    trusted); the refusal on stderr. What the workers will have (``isolation_note``) is each
    command's to print, once, where its output says it: the start of ``batch``'s, the end of
    ``nbgrader autograde``'s table."""
    if not found.isolated and not trusted:
        print("error: this machine cannot isolate one submission from the others and from the "
              f"answer key: {'; '.join(found.missing)}. Grade as root or where the kernel gives "
              "user namespaces, or pass --trust-submissions if every submission is trusted "
              "(each row's status then names the isolation it had)", file=sys.stderr)
        return False
    return True


def limit_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--timeout", type=float, default=Limits().timeout,
                        help="wall seconds the calls of one exercise may take in all, those "
                             f"stopped at --call-timeout aside (default {Limits().timeout:g}); "
                             "past it the exercise is not graded")
    parser.add_argument("--call-timeout", type=float, default=Limits().call,
                        help="CPU seconds one call of the student's code may take (default "
                             f"{Limits().call:g}; {TORCH_CALLS:g}x that in a torch exercise, "
                             f"{CALL_WALL}x that in wall seconds); past it the call is stopped "
                             "and its check fails, with its input (made smaller by at most "
                             f"{SHRINK_STOPS} more stopped calls per exercise), and the exercise "
                             "goes on in a fresh worker")
    parser.add_argument("--memory", type=float, default=4.0,
                        help="GiB a worker may allocate (default 4)")


def trust_option(parser: argparse.ArgumentParser, what: str = "") -> None:
    parser.add_argument("--trust-submissions", action="store_true",
                        help="grade even where this machine gives the workers no namespaces "
                             "(neither root nor user namespaces): a submission could then read "
                             f"the answer key and the other students' files{what}")
