"""Nothing a hidden worker touches reaches what a student sees before publication (issue 44,
part 4): every visible phase of a submission runs, and its verdicts are final and given to the
route, before any of its hidden phases begins (``grader.core.phases``).

The attack: the workers of one machine share the page cache of the files every worker can
read (the interpreter's). Exercise A's code reads a page of such a file: its first worker finds
page 0 out of the cache (which brings it in), so a later worker of the same grading knows it
runs the hidden checks, and reads page 1 or page 2 by a bit of its first hidden input. Exercise
B's code asks which of the three pages are cached (a read that must not wait fails on a page
that is not) and raises the answer, which its visible checks' feedback then shows. On c6e9838
exercise A's hidden phase ran before exercise B's visible phase (``softmax``'s before
``masks``'): B's visible feedback read "your code raised ValueError: pages [0, 2]" where a run
without hidden checks read "pages [0]", a bit of a hidden input before grades were published.
Now B's visible phase ends before A's hidden phase begins: its feedback is "pages [0]", byte
for byte that of a run without hidden checks.

The attack's files import ``os``, which the source rule refuses: the rule is switched off here
(``rule_off``), as the tests of the layers below it do, since no guarantee rests on it. The
order itself is read from the workers' side too: each call of the student's code notes the
machine's monotonic clock, and every visible call of every exercise comes before the moment the
route is given the visible verdicts, every hidden call after it (on c6e9838, softmax's hidden
calls came before masks' visible ones, with one lane and with two).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from submission_tools import SOLUTIONS, make_submission, rule_off

from grader.core import engine, lanes, phases
from grader.integrations.outputs import report
from grader.integrations.routes import gradescope, kernel
from grader.sandbox.isolation import Limits

LIMITS = Limits(timeout=60, call=2.0, memory=512 << 20)
# A file every worker can read and no grading reads: the interpreter's help topics.
MARKED = Path(os.__file__).parent / "pydoc_data" / "topics.py"

# What the test process reads of the page cache (mincore: only the file's owner, or root, is
# told the truth; anyone else reads every page resident).
RESIDENT = '''
import ctypes
import os


def resident(path):
    """How many pages of ``path`` are in the page cache: mapped, never read (mincore)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
    finally:
        os.close(fd)
    pages = (size + 4095) // 4096
    vector = (ctypes.c_ubyte * pages)()
    found = libc.mincore(address, size, vector)
    libc.munmap(address, size)
    return -1 if found != 0 else sum(v & 1 for v in vector)
'''
# What a worker reads of it: a read that must not wait (RWF_NOWAIT) fails on a page that is
# not in the cache. The probe then brings that page in, a moment later: each is probed once.
PROBE = '''import os

MARKED = os.path.join(os.path.dirname(os.__file__), "pydoc_data", "topics.py")


def _cached(page):
    fd = os.open(MARKED, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # that page alone: no readahead
        os.preadv(fd, [bytearray(1)], page * 4096, os.RWF_NOWAIT)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def _read(page):
    fd = os.open(MARKED, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        os.pread(fd, 1, page * 4096)
    finally:
        os.close(fd)
'''
# Exercise A: the answer key's softmax. Its first worker finds page 0 out of the cache (and so
# brings it in); a later worker of the same grading finds it there, and knows it runs hidden
# checks: there it reads page 1 or page 2, by the sign of its first input's sum.
MARKER = PROBE + '''
import numpy as np

hidden = []


def _mark(logits):
    if hidden:
        return
    hidden.append(_cached(0))
    if hidden[0]:
        try:
            x = np.asarray(logits, dtype=np.float64)
            positive = float(np.sum(x[np.isfinite(x)])) > 0
        except Exception:
            positive = False
        _read(1 if positive else 2)


def softmax(logits, axis=-1):
    try:
        _mark(logits)
    except Exception:
        pass
''' + (SOLUTIONS / "softmax.py").read_text().split("    ### BEGIN SOLUTION\n")[1]
# Exercise B: masks that raise the pages they found in the cache at their first call, which
# every visible check's feedback then shows.
READER = PROBE + '''
found = []


def _raise():
    if not found:
        found.append([page for page in (0, 1, 2) if _cached(page)])
    raise ValueError(f"pages {found[0]}")


def sliding_window_mask(t, window):
    _raise()


def padding_mask(lengths, t):
    _raise()
'''


def evict() -> int:
    """Drop MARKED's pages from the page cache (any reader may); how many are left (-1, or
    every page, where this process is not told)."""
    fd = os.open(MARKED, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    namespace: dict = {}
    exec(RESIDENT, namespace)
    return namespace["resident"](str(MARKED))


def visible_routes(graded: engine.SubmissionResult, name: str) -> str:
    """What a student reads of exercise ``name``'s visible checks before grades are
    published: the checks (``grade``, ``batch``), its error and diagnosis, Gradescope's visible
    tests, the notebook's visible test cell."""
    e = graded.results[name]
    shown = [c for c in e.checks if not c.hidden]
    points = 0 if e.error else sum(c.points for c in shown)
    return json.dumps({
        "checks": [dataclasses.asdict(c) for c in shown],
        "error": e.error, "misconceptions": e.misconceptions,
        "gradescope": [t for t in report.to_json(graded)["tests"]
                       if t["visibility"] == "visible" and t["name"].startswith(f"{name}:")],
        "nbgrader": kernel.feedback_text(name, e, shown, points),
    }, sort_keys=True)


def test_a_hidden_phase_leaves_no_page_a_later_visible_check_can_read(tmp_path, monkeypatch):
    rule_off(monkeypatch)
    if not MARKED.is_file() or evict() != 0:
        pytest.skip(f"{MARKED} cannot be dropped from the page cache here")
    folder = make_submission(tmp_path / "sub", {"softmax.py": MARKER, "masks.py": READER},
                             base=None)

    def grade(hidden: bool) -> engine.SubmissionResult:
        assert evict() == 0
        return engine.grade_submission(folder, exercises=["softmax", "masks"],
                                       include_hidden=hidden, limits=LIMITS)

    alone, graded = grade(False), grade(True)
    said = {c.feedback.split("Failed: ", 1)[-1].split(" (at masks.py")[0]
            for c in alone.results["masks"].checks if "ValueError: pages" in c.feedback}
    if not said:  # a layer below refused the reads (a filter on RWF_NOWAIT, say)
        failed = [c.feedback for c in alone.results["masks"].checks if not c.passed]
        pytest.skip(f"a worker cannot ask the page cache here: {failed[:1]}")
    # The channel works: the page softmax's visible worker brought in reaches masks' feedback.
    assert said == {"your code raised ValueError: pages [0]"}, said
    checks = graded.results["softmax"].checks
    assert any(c.hidden for c in checks) and all(c.passed for c in checks)  # no answer changed
    # The hidden worker's page does not: masks' visible feedback is that of a run without it.
    assert visible_routes(graded, "masks") == visible_routes(alone, "masks")


# The order, from the workers' side: each call prints the machine's monotonic clock (a stub's
# checks stop at their first call, so the lines stay few and under the output's cap).
CLOCKED = '''import time

def {function}(*args, **kwargs):
    print("at", time.monotonic_ns())
    raise NotImplementedError
'''
FUNCTIONS = {"softmax": ["softmax"], "masks": ["sliding_window_mask", "padding_mask"],
             "rope": ["rotary_embedding"]}


def clock_file(name: str) -> str:
    return "\n".join(CLOCKED.format(function=f) for f in FUNCTIONS[name])


def times(output: str) -> tuple[list[int], list[int]]:
    """The clock readings of the visible worker's calls and of the hidden worker's."""
    visible, _, hidden = output.partition("[during the hidden checks]")

    def read(text: str) -> list[int]:
        return [int(line.split()[1]) for line in text.splitlines() if line.startswith("at ")]

    return read(visible), read(hidden)


@pytest.mark.parametrize("jobs", [1, 2])
def test_every_visible_call_comes_before_the_route_has_the_verdicts_and_every_hidden_after(
        tmp_path, monkeypatch, jobs):
    rule_off(monkeypatch)
    assert all(tuple(FUNCTIONS[n]) == engine.load().setting(n).exercise.functions
               for n in FUNCTIONS)
    folder = make_submission(tmp_path / "sub", {f"{n}.py": clock_file(n) for n in FUNCTIONS},
                             base=None)
    given: list[tuple[int, dict[str, str]]] = []

    def written(shown: engine.SubmissionResult) -> None:
        given.append((time.monotonic_ns(), {n: visible_routes(shown, n) for n in FUNCTIONS}))
        for name in FUNCTIONS:
            pending = [c for c in shown.results[name].checks if c.hidden]
            assert pending and all(c.feedback.endswith(f"Not graded: {phases.NOT_YET}")
                                   and c.points == 0 for c in pending)

    graded = engine.grade_submission(folder, exercises=list(FUNCTIONS), limits=LIMITS,
                                     jobs=jobs, visible=written)
    assert len(given) == 1
    moment, shown = given[0]
    for name in FUNCTIONS:
        visible, hidden = times(graded.results[name].output)
        assert visible and hidden, graded.results[name].output
        assert max(visible) < moment < min(hidden), name
        # What the route was given is what every output shows of the visible checks.
        assert visible_routes(graded, name) == shown[name]
        assert all(not c.feedback.endswith(phases.NOT_YET) for c in graded.results[name].checks)


def test_each_phase_is_timed_apart_for_the_next_runs_order(monkeypatch):
    monkeypatch.setattr(lanes, "_SECONDS", {"a": 1.0, "b (hidden)": 2.0, "b": 0.5})
    assert lanes.longest_first(["b", "a"]) == ["a", "b"]
    assert lanes.longest_first(["a", "b"], "hidden") == ["b", "a"]


def test_what_a_hidden_phase_needs_crosses_a_lane_as_data():
    plan = phases.Plan.of(["test_matches_answer_key"], engine.Limits(timeout=3.0),
                          found=["softmax-overflow"], failing=True, uses={"f": "why", "g": None})
    seen = phases.Seen(engine.ExerciseResult("softmax", 15.0), plan)
    again = phases.Seen.from_dict(json.loads(json.dumps(dataclasses.asdict(seen))))
    assert again == seen and again.plan is not None
    assert again.plan.exercise_limits() == engine.Limits(timeout=3.0)


def test_gradescope_writes_the_visible_part_before_a_hidden_check_runs(tmp_path):
    """results.json is written twice: the visible tests and the summary line, each hidden test
    reading that it has not run, then the whole; the visible part is the same in both."""
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    shutil.copytree(SOLUTIONS, root / "source" / "solutions")
    wrong = (SOLUTIONS / "softmax.py").read_text().replace(
        "shifted = converted - np.max(converted, axis=axis, keepdims=True)", "shifted = converted")
    (root / "submission" / "softmax.py").write_text(wrong)
    written: list[dict] = []
    final = gradescope.run(root, written.append)
    assert len(written) == 1
    first = written[0]

    def part(data: dict, visibility: str) -> list[dict]:
        return [t for t in data["tests"] if t["visibility"] == visibility]

    assert part(first, "visible") == part(final, "visible") and part(final, "visible")
    assert first["output"] == final["output"]
    later = part(first, "after_published")
    assert later and [t["name"] for t in later] == [t["name"] for t in part(final,
                                                                             "after_published")]
    pending = [t for t in later if t["tags"] == ["softmax"]]  # the others' files are missing
    assert pending and all(t["score"] == 0 and t["output"].endswith(
        f"Not graded: {phases.NOT_YET}") for t in pending)
    assert not any(t["output"].endswith(phases.NOT_YET) for t in final["tests"])


# ``python -m grader grade``, each writing of its --json file also kept in a file of its own.
DUMPS = """import json, sys
from grader.integrations.outputs import report
from grader.integrations.routes.cli import main
original, kept = report.dump_json, []
def dump(result, path):
    original(result, path)
    kept.append(json.loads(open(path).read()))
    open(sys.argv[1], "w").write(json.dumps(kept))
report.dump_json = dump
sys.exit(main(sys.argv[2:]))
"""


def test_grade_json_holds_the_visible_part_before_a_hidden_check_runs(tmp_path):
    target, kept = tmp_path / "results.json", tmp_path / "kept.json"
    done = subprocess.run([sys.executable, "-c", DUMPS, str(kept), "grade", str(SOLUTIONS),
                           "--exercise", "softmax", "--json", str(target)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    first, final = json.loads(kept.read_text())
    assert json.loads(target.read_text()) == final and final["score"] == 15
    hidden = [t for t in first["tests"] if t["visibility"] == "after_published"]
    assert hidden and all(t["output"].endswith(phases.NOT_YET) for t in hidden)
    assert [t for t in first["tests"] if t["visibility"] == "visible"] == [
        t for t in final["tests"] if t["visibility"] == "visible"]
