"""Feedback that reads right: numbers printed so the difference shows and inputs paste back
exactly, a float32 computation named as such, a stub told apart from finished code that
torch refuses, and messages that read as sentences."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import numpy as np
import pytest
from submission_tools import KIT, SOLUTIONS, make_submission

from grader.core import engine
from grader.core.assertions import CheckFailed, assert_close, assert_shape, fmt, fmt_pair
from grader.integrations.routes import handout


def failure(call) -> CheckFailed:
    with pytest.raises(CheckFailed) as caught:
        call()
    return caught.value


def test_a_float64_result_right_only_to_float32_precision_says_so():
    rng = np.random.default_rng(0)
    expected = rng.random((2, 3))
    got = expected * (1 + 3e-7)  # a few float32 roundings off, as a float32 computation is
    message = failure(lambda: assert_close(got, expected, what="the weights")).message
    lines = message.splitlines()
    first = lines[0].split()
    assert first[:2] == ["the", "weights:"] and first[3] != first[first.index("expected") + 1]
    assert lines[1].startswith("Largest error ") and "relative" in lines[1]
    assert "allows |got - expected| <= 1e-09 + 1e-07 * |expected|" in lines[1]
    assert "part of the computation ran in float32?" in lines[2]
    shown_expected, shown_got = fmt_pair(expected, got)
    assert shown_expected != shown_got  # Expected and Got no longer print the same


def test_infinities_in_the_same_places_are_no_error():
    """-inf where the key has -inf (masked scores) is right: the largest error is that of the
    finite entries, not nan."""
    expected = np.array([[0.5, -np.inf], [1.0, -np.inf]])
    got = expected.copy()
    got[0, 0] = 0.6
    with pytest.raises(CheckFailed) as failed:
        assert_close(got, expected)
    assert "nan" not in failed.value.message
    assert "Largest error 0.1 absolute, 0.2 relative" in failed.value.message


def test_expected_and_got_never_print_the_same_numbers():
    expected = np.array([[0.0140100001, 0.0833609401]])
    for got in (expected * (1 + 3e-7), expected.astype(np.float32)):
        shown_expected, shown_got = fmt_pair(expected, got)
        assert shown_expected.split(" (")[0] != shown_got.split(" (")[0]


def test_a_gross_error_gets_no_float32_remark():
    message = failure(lambda: assert_close(np.array([0.5, 0.5]), np.array([1.0, 0.0]))).message
    # The entry furthest outside the tolerance: 0.5 where 0 was due.
    assert "got 0.5 at index (1,), expected 0 (2 of 2 entries off)" in message
    assert "Largest error 0.5 absolute, inf relative" in message
    assert "float32" not in message


def test_a_float32_result_for_float32_input_is_judged_at_float32_tolerance():
    expected = np.array([0.25, 0.75])
    assert_close(expected.astype(np.float32) + 1e-7, expected, dtype=np.float32)
    message = failure(lambda: assert_close(expected + 0.1, expected, dtype=np.float32)).message
    assert "the float32 tolerance allows |got - expected| <= 1e-05 + 0.0001 * |expected|" in message


def test_nan_in_the_result_is_pointed_at():
    got = np.array([[0.5, 0.5], [np.nan, np.nan]])
    message = failure(lambda: assert_close(got, np.full((2, 2), 0.5))).message
    assert "got nan at index (1, 0), expected 0.5 (2 of 4 entries off)" in message
    assert "2 of the entries off are NaN or infinite." in message


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_inputs_print_so_that_they_paste_back_exactly(dtype):
    rng = np.random.default_rng(1)
    values = [rng.normal(size=(3, 4)), np.cos(np.arange(6.0)).reshape(2, 3),
              rng.integers(-80, 80, size=(2, 2, 2)) / 8,
              np.array([1e-30, -0.0, 1e30, -np.inf, np.inf, 3.0])]
    for array in (v.astype(dtype) for v in values):
        text = fmt(array)
        body = text[:text.index(f" ({array.dtype}")]
        back = np.array(eval(body, {"np": np}), dtype=dtype)  # as pasted into a call
        assert back.tobytes() == array.tobytes(), text


def test_a_wrong_shape_reads_as_a_sentence():
    error = failure(lambda: assert_shape(np.zeros((2, 1)), (2, 2), "the weights"))
    assert error.message == "the weights: got shape (2, 1), expected shape (2, 2)"
    assert error.expected is None and error.got is None  # no quoted 'shape (...)' lines


# Finished code whose every forward pass calls a torch reduction that torch does not implement
# for complex numbers: torch raises NotImplementedError, and the submission is no stub.
TORCH_REFUSES = (
    "        b, t, c = x.shape\n",
    "        b, t, c = x.shape\n        torch.zeros(1, dtype=torch.complex64).amax(0)\n",
)


def test_not_implemented_yet_means_a_stub_not_a_library_that_refuses(tmp_path):
    text = (SOLUTIONS / "mha.py").read_text()
    assert text.count(TORCH_REFUSES[0]) == 1
    finished = make_submission(tmp_path / "finished",
                               {"mha.py": text.replace(*TORCH_REFUSES)})
    result = engine.grade_submission(finished, exercises=["mha"]).results["mha"]
    failing = [c.feedback for c in result.checks if not c.passed]
    assert failing and not result.not_implemented
    assert not any("not implemented yet" in f for f in failing)
    assert any('your code raised NotImplementedError: "max_values_cpu" not implemented' in f
               for f in failing)
    stub = make_submission(tmp_path / "stub", {"mha.py": (KIT / "exercises" / "mha.py")
                                               .read_text()})
    assert engine.grade_submission(stub, exercises=["mha"]).results["mha"].not_implemented


OLD_PYTHON = """\
#!/bin/sh
# Answers the Makefile's version questions as Python 3.10 would.
case "$*" in
  *version.split*) echo 3.10.12 ;;
  *version_info*) echo False ;;
  *) exit 1 ;;
esac
"""


def outside_make() -> dict:
    """The environment of a student's shell: ``make test`` runs this suite inside make, and
    make's own variables would make the inner make announce its directory."""
    return {key: value for key, value in os.environ.items()
            if key not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")}


@pytest.mark.parametrize("makefile", ["kit", "handout"])
def test_make_stops_at_once_with_one_line_on_python_older_than_3_11(makefile, tmp_path):
    text = (KIT / "Makefile").read_text() if makefile == "kit" else handout.MAKEFILE
    (tmp_path / "Makefile").write_text(text)
    for name in ("pyproject.toml", "requirements.lock"):
        (tmp_path / name).write_text((KIT / name).read_text())
    python = tmp_path / "python3.10"
    python.write_text(OLD_PYTHON)
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    done = subprocess.run(["make", f"PYTHON={python}", "grade"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60,
                          env=outside_make())
    assert done.returncode != 0
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs Python 3.11 or newer" in lines[0]
    assert f"{python} is 3.10.12" in lines[0]
    assert not Path(tmp_path / ".venv").exists()
