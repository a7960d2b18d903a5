"""Reading a submission: the source rule's scan is linear in the file, and the parse and the
rule run in the reader, a process of their own under the exercise's limits and the sandbox
uid, never in the grading process. A file too large, too deep or too slow to read is its
exercise's status ("could not be read within its limits"); the rest of the grade goes on."""

from __future__ import annotations

import ast
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

import pytest
from submission_tools import EXERCISES, KIT, SOLUTIONS, make_submission

from grader.core import delegation_verdicts, engine
from grader.core.delegation import ATTENTION_RULE, NUMPY_RULE, Rule
from grader.core.delegation_verdicts import NESTED, verdict
from grader.integrations.routes import notebook
from grader.sandbox import reader, readers
from grader.sandbox.errors import WorkerLost
from grader.sandbox.isolation import GiB, Limits, Sandbox, Spent

MiB = 1 << 20


# -- the scan: each line looked at a bounded number of times, in any order -----------------------
def work(source: str, rule: Rule) -> tuple[int, int]:
    """The lines of Python ``verdict`` runs on ``source`` (every loop's turn, every call's
    lines), and the peak bytes it allocates."""
    lines = [0]

    def count(frame, event, arg):
        lines[0] += event == "line"
        return count

    tracemalloc.start()
    sys.settrace(count)
    try:
        verdict(source, rule)
    finally:
        sys.settrace(None)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return lines[0], peak


def reverse_chain(n: int) -> str:  # x0 = x1, x1 = x2, ...: one pass each, in a fixpoint
    return ("import numpy as np\n\ndef unused():\n"
            + "".join(f"    x{i} = x{i + 1}\n" for i in range(n)) + f"    x{n} = np.linalg\n")


SHAPES = {  # name: (source of size n, the rule, n, 2n)
    "reverse-ordered chain": (reverse_chain, NUMPY_RULE, 500, 1000),
    "one value, many targets": (lambda n: "import numpy as np\n" + "".join(
        f"a{i} = " for i in range(n)) + "(" + ", ".join(f"b{i}" for i in range(n))
        + ")\nb0 = np.linalg\n", NUMPY_RULE, 300, 600),
    "private attribute chain": (lambda n: "class K:\n    def __init__(self):\n        "
                                "self._a = 1\n" + ("y = x" + "._a" * n + "\n") * 10,
                                NUMPY_RULE, 80, 160),
    "sum of strings": (lambda n: ("y = " + " + ".join(['"__"'] * n) + "\n") * 10,
                       NUMPY_RULE, 80, 160),
    # (each link is a finding: past the first few its text is the capped one, WHAT_CAP)
    "attention call chain": (lambda n: ("y = " + "F" * 3000 + ".scaled_dot_product_attention"
                                        * n + "\n") * 10, ATTENTION_RULE, 80, 160),
    "module attribute chain": (lambda n: "import numpy as np\n" + (
        "y = np.linalg.norm" + ".T" * n + "\n") * 10, NUMPY_RULE, 80, 160),
    "one name, many modules, many aliases": (lambda n: "import numpy as np\n" + "".join(
        f"m = np.{module}\n" for module in ("linalg", "random", "testing", "typing"))
        + "".join(f"a{i} = m\n" for i in range(n)), NUMPY_RULE, 500, 1000),
    "one import, many names": (lambda n: "from . import " + ", ".join(
        f"module_{i}" for i in range(n)) + "\n", NUMPY_RULE, 1000, 2000),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_the_scan_takes_twice_the_work_for_twice_the_file(shape):
    """The student who wants the grader stuck writes the lines in reverse order (one pass of
    the old fixpoint per line: 4,000 lines took 90 s a scan), chains one attribute on another,
    or names one module thousands of times: twice the lines cost twice the work and memory,
    not four times."""
    make, rule, small, large = SHAPES[shape]
    lines, peak = work(make(small), rule)
    more_lines, more_peak = work(make(large), rule)
    assert more_lines < 2.5 * lines, (lines, more_lines)
    assert more_peak < 2.5 * peak, (peak, more_peak)


def test_a_long_place_is_cut_in_the_message_not_in_the_finding_count():
    found = verdict("x = '__" + "a" * 10_000 + "__'\n", NUMPY_RULE)
    assert found is not None and found.startswith("it uses '__aaa")
    assert " [...] (line 1), and " in found and len(found) < 2500


# -- the reader: as the interpreter reads the file, under the exercise's limits ------------------
def test_a_coding_line_cannot_hide_a_file_from_the_rule(tmp_path):
    """The attack (4e1a685: 25/25): torch's own multi_head_attention_forward, read from its
    source and run (tests/attacks/mha-reload-b), in a file whose first line says it is UTF-7.
    Read as UTF-8 (as the rule read it) the file does not parse, and the rule left it to the
    worker; the interpreter reads it as UTF-7. The reader reads it as the interpreter does."""
    attack = (KIT / "tests" / "attacks" / "mha-reload-b" / "mha.py").read_text()
    text = attack + "\n\n_steps = 0\n_steps += 1\n"  # `+=` is `+-=` in UTF-7: no parse as UTF-8
    folder = make_submission(tmp_path / "student")
    (folder / "mha.py").write_bytes(b"# -*- coding: utf-7 -*-\n" + text.encode("utf-7"))
    mha = engine.grade_submission(folder, exercises=["mha"]).results["mha"]
    assert mha.score == 0
    assert mha.error.startswith("it uses open (line 11); vars (line 14)")
    assert "it uses torch.nn.functional.__file__ (line 11), and " in mha.error


def test_text_a_worker_cannot_read_is_found_as_the_worker_would_not_find_it(tmp_path):
    """Non-ASCII names and a coding line: the reader, as the sandbox uid, still parses them
    (the parser's codecs and unicodedata were imported before it dropped root)."""
    os.chmod(tmp_path, 0o755)  # as the copy of a submission: the sandbox uid may enter it
    (tmp_path / "a.py").write_text("import numpy as np\nπ = 3.14\nimport os\n")
    (tmp_path / "b.py").write_bytes(b"# coding: latin-1\nimport numpy as np\nx = '\xe9'\n")
    found = readers.read_files(tmp_path, ["a.py", "b.py"], NUMPY_RULE, frozenset(),
                               Limits(timeout=30))
    assert found["a.py"].readable and found["a.py"].verdict.startswith("it uses import os")
    assert found["b.py"].readable and found["b.py"].verdict is None


def literal(nbytes: int) -> str:
    return "DATA = [" + "1," * (nbytes // 2 - 6) + "]\n"


def in_child(work) -> object:
    """``work()``'s JSON-able result, computed in a forked child of this process: its own peak
    memory (``ru_maxrss``) starts at what it holds when forked, not at this process's peak."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read)
            with os.fdopen(write, "w") as out:
                out.write(json.dumps(work()))
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as handle:
        text = handle.read()
    assert os.waitpid(pid, 0)[1] == 0
    return json.loads(text)


def test_an_18_mib_literal_costs_its_exercise_and_not_the_grading_process(tmp_path):
    """The attack (4e1a685: the grading process parsed it, 9 GB for 18 MiB): a helper module
    softmax.py imports, one list literal the size the copy accepts. The grading process's own
    peak memory grows by less than 64 MiB; softmax's status names the file; masks, which does
    not import it, is graded in full."""
    folder = make_submission(tmp_path / "student", {
        "data.py": literal(18 * MiB),
        "softmax.py": "import data  # noqa\n" + (SOLUTIONS / "softmax.py").read_text()})

    def grade():
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        result = engine.grade_submission(folder, exercises=["softmax", "masks"], jobs=1,
                                         limits=Limits(timeout=30, memory=GiB // 4))
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        return {name: [e.score, e.max_score, e.error] for name, e in result.results.items()
                } | {"grown_kib": grown}

    found = in_child(grade)
    assert found["softmax"] == [0, 15, "data.py could not be read within its limits (0.25 GiB "
                                       "of memory, 30 s for the exercise)"]
    assert found["masks"] == [10, 10, None]
    assert found["grown_kib"] < 64 * 1024, found


def test_nesting_too_deep_for_the_parser_is_said_as_before(tmp_path):
    """The parser's own depth (a MemoryError with little memory used) is not the reader's
    limit: the file keeps the sentence it had."""
    os.chmod(tmp_path, 0o755)
    (tmp_path / "deep.py").write_text("x = " + "-" * 100_000 + "1\n")
    (tmp_path / "wide.py").write_text(("x = " + "[" * 150 + "]" * 150 + "\n") * 100)
    found = readers.read_files(tmp_path, ["deep.py", "wide.py"], NUMPY_RULE, frozenset(),
                               Limits(timeout=30))
    assert found["deep.py"] == readers.Read(NESTED, (), found["deep.py"].seconds)
    assert found["wide.py"].readable and found["wide.py"].verdict is None


def test_a_file_too_slow_to_read_stops_at_the_time_limit_which_is_for_all_the_files(
        tmp_path, monkeypatch):
    os.chmod(tmp_path, 0o755)
    (tmp_path / "slow.py").write_text(reverse_chain(300_000))  # 5 MB: seconds to parse
    (tmp_path / "after.py").write_text("import numpy as np\n")
    found = readers.read_files(tmp_path, ["slow.py", "after.py"], NUMPY_RULE, frozenset(),
                               Limits(timeout=0.5))  # a whole second: rlimits count seconds
    assert not found["slow.py"].readable and 1 <= found["slow.py"].seconds < 5
    assert found["after.py"] == readers.Read(readable=False)  # no time was left for it
    again = readers.read_files(tmp_path, ["slow.py", "after.py"], NUMPY_RULE, frozenset(),
                               Limits(timeout=0.5))
    assert again["slow.py"] == found["slow.py"]  # not tried again with the same limits
    assert again["after.py"] == readers.Read(readable=False)  # its time went on slow.py
    fresh = readers.read_files(tmp_path, ["after.py"], NUMPY_RULE, frozenset(),
                               Limits(timeout=0.5))
    assert fresh["after.py"].readable and fresh["after.py"].verdict is None


def test_results_are_kept_by_digest_and_a_file_that_could_not_be_read_by_its_limits_too(
        tmp_path, monkeypatch):
    os.chmod(tmp_path, 0o755)
    (tmp_path / "big.py").write_text(literal(4 * MiB))
    (tmp_path / "helper.py").write_text("from . import other\n")
    small = Limits(timeout=30, memory=GiB // 8)
    first = readers.read_files(tmp_path, ["helper.py", "big.py"], NUMPY_RULE,
                               frozenset({"other"}), small)
    assert first["helper.py"].imports == ("other",) and not first["big.py"].readable

    def no_reader(*args, **kwargs):
        raise AssertionError("read again")

    monkeypatch.setattr(readers, "_connected", no_reader)
    again = readers.read_files(tmp_path, ["helper.py"], NUMPY_RULE, frozenset({"other"}), small)
    assert again == {"helper.py": first["helper.py"]}
    other_rule = readers.read_files(tmp_path, ["big.py"], ATTENTION_RULE, frozenset(), small)
    assert other_rule == {"big.py": first["big.py"]}  # one try per file and limits


REPLY = {"path": "a.py", "verdict": None, "imports": [], "exports": [], "takes": []}


@pytest.mark.parametrize("reply", [
    None, {"path": "a.py", "verdict": None}, {**REPLY, "path": "b.py"}, {**REPLY, "verdict": 3},
    {**REPLY, "imports": ["os"]}, {**REPLY, "imports": [["helper"]]}, {**REPLY, "more": 1},
    {**REPLY, "exports": "np"}, {**REPLY, "exports": [1]}, {**REPLY, "takes": [["a", "b", 3]]},
    {**REPLY, "takes": [["helper", "np", "3", "from helper import np"]]},
])
def test_a_reply_of_another_shape_is_a_file_that_could_not_be_read(reply):
    assert readers._checked(reply, "a.py", frozenset({"helper"}), 0.1) == readers.Read(
        seconds=0.1, readable=False)
    good = readers._checked({**REPLY, "verdict": "it uses x", "imports": ["helper"],
                             "takes": [["helper", "np", 3, "helper.np"]]},
                            "a.py", frozenset({"helper"}), 0.1)
    assert good.imports == ("helper",) and good.takes == (("helper", "np", 3, "helper.np"),)


def test_the_grading_process_parses_no_students_text(tmp_path, monkeypatch):
    """Every route: the exercise files (the rule, and what each imports) and a notebook's answer
    cells (what each uses of the others) are parsed by the reader alone."""
    def parse(*args, **kwargs):
        raise AssertionError("parsed in the grading process")

    folder = make_submission(tmp_path / "student", {
        "helper.py": "import numpy as np\n\ndef stable(x):\n    return x - np.max(x)\n",
        "softmax.py": "from helper import stable  # noqa\n"
                      + (SOLUTIONS / "softmax.py").read_text()})
    cell = "%%exercise attention\n" + (SOLUTIONS / "attention.py").read_text().replace(
        "from .softmax import softmax\n", "")
    nb = {"cells": [{"cell_type": "code", "source": cell,
                     "metadata": {"nbgrader": {"grade_id": "attention"}}}]}
    monkeypatch.setattr(ast, "parse", parse)
    monkeypatch.setattr(delegation_verdicts, "parse", parse, raising=False)
    result = engine.grade_submission(folder, exercises=["softmax"])
    assert result.results["softmax"].score == 15
    assert notebook.answers(nb).files["attention"].startswith(
        "from .softmax import softmax  # attention.py, saved by %%exercise attention\n")


def test_the_time_spent_reading_comes_off_the_exercises_time(tmp_path):
    os.chmod(tmp_path, 0o755)
    folder = make_submission(tmp_path / "student")
    broken, limits = engine.build_view(folder, tmp_path / "views" / "softmax",
                                       EXERCISES["softmax"], Limits(timeout=9))
    assert broken is None and isinstance(limits, Spent) and limits.timeout == 9
    assert 0 < limits.spent < 9
    spent = Spent(**{**vars(limits), "timeout": 5, "spent": 5.0})
    with Sandbox(tmp_path / "views" / "softmax", "softmax", limits=spent,
                 framework="numpy") as sandbox, pytest.raises(WorkerLost, match="after 5 s"):
        sandbox.request("hello")


NON_ROOT = """
import json, sys
from pathlib import Path
from grader.sandbox import readers
from grader.sandbox.confine import Limits
from grader.core.delegation import NUMPY_RULE
found = readers.read_files(Path(sys.argv[1]), ["softmax.py", "big.py", "u7.py"], NUMPY_RULE,
                           frozenset({"softmax"}), Limits(timeout=30, memory=1 << 27))
print(json.dumps({p: [f.readable, f.verdict] for p, f in found.items()}))
"""


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/python3").is_file(),
                    reason="needs root to become another user, and a system python")
def test_as_an_ordinary_user_the_reader_holds_the_same_limits():
    """As uid 65534 (no sandbox uid to take, no root to drop), with the system's python: the
    reader's code alone (four modules of the standard library) on a copy that user can read."""
    base = Path(tempfile.mkdtemp(prefix="attention-kit-reader-test-"))  # pytest's is root's
    try:
        for name in ("sandbox/__init__.py", "sandbox/bounds.py", "sandbox/confine.py",
                     "sandbox/seccomp.py", "sandbox/reader.py", "sandbox/readers.py",
                     "sandbox/served.py",
                     *(f"core/{module}.py" for module in reader.SOURCES[:-1])):
            (base / "grader" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(KIT / "grader" / name, base / "grader" / name)
        (base / "grader" / "__init__.py").write_text("")
        files = base / "files"
        files.mkdir()
        shutil.copyfile(SOLUTIONS / "softmax.py", files / "softmax.py")
        (files / "big.py").write_text(literal(2 * MiB))
        (files / "u7.py").write_bytes(b"# coding: utf-7\n#+AAo-import os\n")
        for path in [base, *base.rglob("*")]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        done = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534",
                               "--clear-groups", "/usr/bin/python3", "-I", "-c",
                               "import sys; sys.path.insert(0, '.'); " + NON_ROOT, str(files)],
                              cwd=base, capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(base)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert found["softmax.py"] == [True, None]
    assert found["big.py"] == [False, None]  # 2 MB of literal: a GiB to parse, 128 MiB given
    assert found["u7.py"][0] and found["u7.py"][1].startswith("it uses import os (line 3)")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a sandbox uid to take")
def test_as_root_the_reader_reads_as_a_sandbox_uid(tmp_path):
    """A file only root may read is one the reader cannot read: it dropped root before it
    read a byte (the copy of a submission is 0644, and is read)."""
    os.chmod(tmp_path, 0o755)
    (tmp_path / "open.py").write_text("import numpy as np\n")
    # Not the open file's text: a text already read is known by its digest, whoever holds it.
    (tmp_path / "root.py").write_text("import numpy as np  # root's alone\n")
    os.chmod(tmp_path / "root.py", 0o600)
    found = readers.read_files(tmp_path, ["open.py", "root.py"], NUMPY_RULE, frozenset(),
                               Limits(timeout=30))
    assert found["open.py"].readable and not found["root.py"].readable
