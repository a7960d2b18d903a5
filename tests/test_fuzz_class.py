"""Every input a class run reads, fuzzed (issue 19): no submission stops a run or moves anyone
else's row.

What is drawn: folder and file names as bytes, file contents (bytes, text with lone surrogates,
code that raises or prints such text), notebook JSON, roster files, and the messages a worker
sends back (frames and error reports). The runs that grade (``batch`` and the Gradescope run) are
few and cheap, a one-exercise course; the readers and writers they feed are fuzzed in-process
with many more examples. Seeds are fixed (``derandomize``): a failure reproduces.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import socket
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, assume, example, given, settings
from hypothesis import strategies as st
from submission_tools import SOLUTIONS, make_submission
from test_class_run import one_exercise_course

from grader.core import course as course_module
from grader.core.results import CheckResult, ExerciseResult, StudentRecord, SubmissionResult
from grader.integrations.outputs import class_report, exports, inert, report
from grader.integrations.routes import batch, gradescope, notebook
from grader.sandbox import protocol
from grader.sandbox.errors import StudentError, printable

# The grading runs: a few examples, and a failure is reported as found (shrinking it would
# grade again and again).
FEW = settings(max_examples=5, deadline=None, derandomize=True, database=None,
               suppress_health_check=list(HealthCheck),
               phases=[Phase.explicit, Phase.reuse, Phase.generate])
MANY = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))

# -- what a student controls ----------------------------------------------------------------------
name_bytes = st.binary(min_size=1, max_size=40).filter(
    lambda b: b"/" not in b and b"\0" not in b and not b.startswith(b"."))
# Any text, lone surrogates included (Hypothesis leaves them out unless asked).
surrogate_text = st.text(alphabet=st.characters() | st.sampled_from("\ud800\udce9\udfff"),
                         max_size=60)
SNIPPETS = [
    "def kv_cache_mask(n_cached, n_new):\n    raise ValueError({msg!r})\n",
    "print({msg!r})\nfrom .kv_cache_ok import kv_cache_mask\n",
    "def kv_cache_mask(n_cached, n_new):\n    return {msg!r}\n",
    "import numpy as np\n\ndef kv_cache_mask(n_cached, n_new):\n    print({msg!r})\n"
    "    return np.zeros((n_new, n_cached + n_new), dtype=bool)\n",
]
code = st.builds(lambda s, m: s.format(msg=m).encode("utf-8", "surrogatepass"),
                 st.sampled_from(SNIPPETS), surrogate_text)
contents = st.one_of(st.binary(max_size=120), code,
                     surrogate_text.map(lambda t: t.encode("utf-8", "surrogatepass")))
file_names = st.one_of(st.just(b"kv_cache.py"), st.just(b"kv_cache_ok.py"), name_bytes)
submissions = st.tuples(name_bytes, st.dictionaries(file_names, contents, max_size=3))


def write_bad(root: Path, folder: bytes, files: dict[bytes, bytes]) -> Path:
    path = Path(os.fsdecode(os.fsencode(root) + b"/" + folder))
    path.mkdir()
    for name, data in files.items():
        (Path(os.fsdecode(os.fsencode(path) + b"/" + name))).write_bytes(data)
    return path


@pytest.fixture(scope="module")
def one_exercise(tmp_path_factory):
    """The one-exercise course, and the honest student's row graded alone (the baseline)."""
    base = tmp_path_factory.mktemp("fuzz")
    course = course_module.load(one_exercise_course(base / "course.toml"))
    make_submission(base / "alone" / "ada")
    (ada,) = batch.run(base / "alone", jobs=1, course=course, key_folder=SOLUTIONS,
                       progress=None)
    return course, ada


def check_outputs(rows: list[StudentRecord], course, out: Path) -> None:
    """Every file a class run writes can be written from ``rows`` and holds inert text."""
    exports.write_grades(rows, out / "grades.csv", course)
    batch.write_json(rows, out / "json")
    class_report.build(rows, course, out / "report")
    roster = exports.Roster(list(exports.ROSTER_COLUMNS), [
        {"folder": r.student, "id": r.student, "name": r.status, "email": r.student}
        for r in rows])
    found = exports.match(roster, rows)
    exports.write_csv(found, out / "roster.csv", course)
    for kind in exports.EXPORTS:
        exports.write_export(kind, found, out / f"{kind}.csv", course, "attention")
    for path in out.glob("*.csv"):
        for line in csv.reader(io.StringIO(path.read_text(encoding="utf-8"))):
            for cell in line:
                assert cell[:1] not in ("=", "+", "@", "\t", "\r"), (path.name, cell)
    summary_md = (out / "report" / "summary.md").read_text(encoding="utf-8")
    assert "<" not in summary_md
    assert json.loads((out / "report" / "summary.json").read_text())["class"]["students"] == len(
        rows)


# -- grading runs --------------------------------------------------------------------------------
def seen(record: StudentRecord) -> tuple:
    """All of a student's record that any output shows (its result's folder aside: the same
    student graded from another folder)."""
    return (record.student, record.status, record.kind, record.isolation,
            json.dumps(report.to_json(record.result, include_output=True), sort_keys=True))



@FEW
@given(bad=submissions)
def test_batch_finishes_and_the_honest_row_is_untouched(one_exercise, bad):
    course, ada = one_exercise
    folder, files = bad
    assume(inert.name(os.fsdecode(folder)) != "ada")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "class"
        make_submission(root / "ada")
        write_bad(root, folder, files)
        rows = batch.run(root, jobs=2, course=course, key_folder=SOLUTIONS, progress=None)
        assert [r.student for r in rows] == sorted(["ada", inert.name(os.fsdecode(folder))])
        honest = next(r for r in rows if r.student == "ada")
        assert seen(honest) == seen(ada)
        check_outputs(rows, course, Path(tmp) / "out")


@FEW
@given(bad=submissions)
def test_the_gradescope_run_always_leaves_a_results_json(one_exercise, bad):
    course_file = one_exercise_course(Path(tempfile.mkdtemp()) / "course.toml")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "source").mkdir()
        shutil.copyfile(course_file, root / "source" / "course.toml")
        shutil.copytree(SOLUTIONS, root / "source" / "solutions")
        (root / "submission").mkdir()
        write_bad(root / "submission", *bad)
        assert gradescope.run_and_write(root) == 0
        data = json.loads((root / "results" / "results.json").read_text())
        assert isinstance(data["score"], (int, float)) and data["output"]


# -- readers and writers, in-process ------------------------------------------------------------
statuses = st.one_of(st.just("graded"), surrogate_text.map(lambda t: "not graded: " + t))


@st.composite
def rows_of_a_class(draw):
    students = sorted({inert.name(os.fsdecode(b)) for b in draw(st.lists(name_bytes, min_size=1,
                                                                         max_size=4))})
    rows = []
    for student in students:
        status = draw(statuses)
        passed = draw(st.booleans())
        check = CheckResult("kv_cache", draw(surrogate_text), draw(surrogate_text),
                            1 if passed else 0, 1, False, passed, draw(surrogate_text))
        graded = ExerciseResult("kv_cache", 15, checks=[check],
                                error=draw(st.none() | surrogate_text),
                                misconceptions=draw(st.lists(surrogate_text, max_size=2)),
                                output=draw(surrogate_text))
        result = SubmissionResult(student, {"kv_cache": graded}, True)
        rows.append(StudentRecord(student, status, result=result if status == "graded"
                                  else None))
    return sorted(rows, key=lambda r: r.student)


@MANY
@given(rows=rows_of_a_class())
def test_reports_and_exports_write_whatever_the_rows_hold(one_exercise, rows):
    with tempfile.TemporaryDirectory() as tmp:
        check_outputs(rows, one_exercise[0], Path(tmp))
        again = class_report.load_rows(Path(tmp) / "json", Path(tmp) / "grades.csv")
        assert len(again) == len(rows)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | surrogate_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(surrogate_text, inner,
                                                                 max_size=4), max_leaves=20)
answer_cells = st.builds(
    lambda grade_id, source: {"cell_type": "code", "source": source,
                              "metadata": {"nbgrader": {"grade_id": grade_id}}},
    st.sampled_from(["softmax", "kv_cache", "mha"]) | surrogate_text,
    surrogate_text | st.lists(surrogate_text, max_size=3) | json_values)


@MANY
@example(nb={"cells": [{"cell_type": "code", "source": "%%exercise softmax\nx = '\ud800'",
                        "metadata": {"nbgrader": {"grade_id": "softmax"}}}]})
@example(nb={"cells": [{"cell_type": "code", "source": "%%exercise kv_cache\nx" + ".y" * 200_000,
                        "metadata": {"nbgrader": {"grade_id": "kv_cache"}}}]})
@given(nb=st.one_of(json_values, st.builds(lambda cells: {"cells": cells},
                                           st.lists(answer_cells | json_values, max_size=5))))
def test_any_notebook_json_is_read_or_refused_with_a_reason(nb):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "attention.ipynb"
        path.write_text(json.dumps(nb))  # ASCII: lone surrogates travel as \\ud800 escapes
        try:
            data = notebook.read_notebook(path)
        except notebook.NotANotebook:
            return
        written = notebook.write_answers(notebook.answers(data), Path(tmp) / "answers")
        assert all(p.is_file() for p in written)


@MANY
@example(names=[b"bob\xa0", "bob\u00a0".encode()])
@example(names=["\U000f0000".encode(), "\uf0000".encode()])
@given(names=st.lists(name_bytes, min_size=2, max_size=6, unique=True))
def test_different_folders_never_share_a_name(names):
    shown = [inert.name(os.fsdecode(n)) for n in names]
    assert len(set(shown)) == len(shown)
    assert all(s.isprintable() for s in shown)


@MANY
@given(text=st.binary(max_size=300))
def test_any_roster_is_read_or_refused_with_a_reason(text):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "roster.csv"
        path.write_bytes(text)
        try:
            roster = exports.load_roster(path)
        except exports.RosterError as error:
            assert str(path) in str(error)
            return
        rows = [StudentRecord("ada", "graded", result=SubmissionResult("ada", {
            "kv_cache": ExerciseResult("kv_cache", 15)}, True))]
        found = exports.match(roster, rows)
        exports.write_csv(found, Path(tmp) / "out.csv", course_module.load())


@MANY
@given(info=st.dictionaries(st.sampled_from(["type", "message", "where", "value_error"]),
                            json_values))
def test_any_error_report_from_a_worker_is_shown_as_valid_text(info):
    error = StudentError(info)
    for text in (str(error), error.describe(), printable(info.get("message"), 50)):
        text.encode("utf-8")  # no lone surrogate survives to a file


# each one Sandbox.request turns into "the worker sent a malformed reply"
HANDLED = (EOFError, OSError, protocol.ProtocolError, ValueError, TypeError, OverflowError,
           RecursionError)


def _received(data: bytes):
    left, right = socket.socketpair()
    with left, right:
        right.sendall(data)
        right.shutdown(socket.SHUT_WR)
        return protocol.recv(left, deadline=None)


@MANY
@given(frame=st.binary(max_size=64), rest=st.integers(0, 2**64 - 1) | st.integers(0, 120))
def test_any_frame_from_a_worker_is_a_value_or_an_error_the_sandbox_handles(frame, rest):
    with contextlib.suppress(*HANDLED):
        _received(struct.pack("<Q", rest) + frame)


@MANY
@given(header=st.integers(0, 2**64 - 1) | st.integers(0, 80),
       count=st.integers(0, 2**64 - 1) | st.integers(0, 5),
       sizes=st.lists(st.integers(0, 2**64 - 1) | st.integers(0, 24), max_size=5),
       tree=json_values | st.fixed_dictionaries(
           {"__array__": st.integers(-1, 5), "dtype": st.sampled_from(["float64", "int8", "x"]),
            "shape": st.lists(st.integers(-1, 4), max_size=3)}),
       body=st.binary(max_size=64), honest=st.booleans())
def test_a_frame_whose_lengths_lie_is_an_error_the_sandbox_handles(header, count, sizes, tree,
                                                                   body, honest):
    """Well framed on the outside (the first length is right), anything inside: lengths that
    disagree with each other or with the frame, array descriptors that point nowhere."""
    text = json.dumps(tree).encode()
    if honest:
        header, count = len(text), len(sizes)
    inner = struct.pack(f"<QQ{len(sizes)}Q", header, count, *sizes) + text + body
    with contextlib.suppress(*HANDLED):
        _received(struct.pack("<Q", len(inner)) + inner)


@MANY
@given(value=st.recursive(
    st.none() | st.booleans() | st.integers(-2**60, 2**60) | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.builds(lambda shape, kind: np.arange(int(np.prod(shape))).astype(kind).reshape(shape),
                st.lists(st.integers(0, 3), max_size=3),
                st.sampled_from(["float64", "float32", "int64", "bool", "complex64"])),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=4).filter(lambda k: not k.startswith("__")), inner,
                      max_size=3), max_leaves=12))
def test_what_is_sent_is_what_is_received(value):
    got = _received(protocol.encode(value))
    assert repr(got) == repr(value)


class _Lying(np.ndarray):
    """An array whose own tobytes lies: a sender must read its memory, not ask it."""

    def tobytes(self, *args, **kwargs):
        return b"\xff" * self.nbytes  # the right length, other values


@pytest.mark.parametrize("value", [
    np.arange(6.0).reshape(2, 3).T,  # not C-contiguous
    np.arange(12).reshape(3, 4)[:, ::2],  # strided
    np.arange(4, dtype=">f8"),  # big-endian
    np.array(2, dtype=">i4"),  # 0-d and big-endian
    np.array(3.5),  # 0-d
    np.zeros((0, 3)),
    np.arange(3.0).view(_Lying),
    np.ma.masked_array([1.0, 2.0], mask=[True, False]),
], ids=["transposed", "strided", "big-endian", "0-d-big-endian", "0-d", "empty", "subclass",
        "masked"])
def test_an_array_travels_as_its_values_whatever_its_layout_or_class(value):
    plain = np.asarray(np.ma.getdata(value))
    got = _received(protocol.encode({"x": value, "pair": (value, 1)}))
    for array in (got["x"], got["pair"][0]):
        assert type(array) is np.ndarray
        assert array.dtype == plain.dtype.newbyteorder("=") and array.shape == plain.shape
        assert np.array_equal(array, plain)


def _frame(tree, *buffers: bytes) -> bytes:
    """A well-framed message whose header is ``tree``, with ``buffers`` after it."""
    header = json.dumps(tree).encode()
    sizes = struct.pack(f"<QQ{len(buffers)}Q", len(header), len(buffers), *map(len, buffers))
    inner = sizes + header + b"".join(buffers)
    return struct.pack("<Q", len(inner)) + inner


# A red team's frames (a worker can send any bytes). Each was decoded before, at a cost the
# message's size did not bound, or into something no honest worker sends.
@pytest.mark.parametrize("tree,buffers", [
    # 838,000 entries of 9999 then a 0 took the length check 230 s to multiply (now refused
    # at once); these are short, and refused all the same
    ({"__array__": 0, "dtype": "uint8", "shape": [9999] * 65 + [0]}, [b""]),
    ({"__array__": 0, "dtype": "uint8", "shape": [0, 2**40]}, [b""]),
    # one buffer named by many arrays: each was a copy of it (a 4 MB header, 80,000 names of
    # a 60 MiB buffer: terabytes)
    ([{"__array__": 0, "dtype": "uint8", "shape": [4]}] * 2, [b"abcd"]),
    ({"__array__": True, "dtype": "uint8", "shape": [4]}, [b"", b"abcd"]),
    ({"__array__": 0, "dtype": ["uint8"], "shape": [4]}, [b"abcd"]),
    ({"__tuple__": "abc"}, []),
    ({"__tuple__": {"a": 1}}, []),
], ids=["many-dims", "absurd-empty", "one-buffer-twice", "bool-index", "list-dtype",
        "tuple-of-a-string", "tuple-of-a-dict"])
def test_a_frame_beyond_what_the_sender_makes_is_refused(tree, buffers):
    with pytest.raises(protocol.ProtocolError):
        _received(_frame(tree, *buffers))
