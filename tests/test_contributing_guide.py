"""The contributors' guide holds: an exercise of the test's own (ALiBi's head slopes, a bonus
exercise) is added to a copy of the kit as ``docs/contributing.md``'s "Adding an exercise" says,
with the commands its marked blocks show, run as written: the zoo entries written with the
page's command, then ``make handout-check``, ``make regenerate EXERCISE=<name>``, ``make lint``
and the tests it names, which pass.

What the author writes by hand is the key, the module and the zoo entries; every other file
that changes is one ``make regenerate`` writes. The test prints each command's seconds
(wall, and CPU).
"""

from __future__ import annotations

import hashlib
import re
import resource
import time
from pathlib import Path

import kit_copy
from submission_tools import KIT

GUIDE = KIT / "docs" / "contributing.md"
NAME = "alibi"
MISCONCEPTION = "alibi-slopes-from-zero"

KEY = '''"""Bonus exercise `alibi`: the head slopes of ALiBi (attention with linear biases)."""

import numbers

import numpy as np


def alibi_slopes(n_head):
    """The slope of each head in ALiBi: head h (from 1) gets 2 ** (-8 h / n_head).

    Args:
        n_head: the number of heads, an integer >= 1.

    Returns:
        np.ndarray of dtype float64 and shape ``(n_head,)``: 2 ** (-8 / n_head) first, down
        to 2 ** -8 for the last head.

    Raises:
        ValueError: if ``n_head`` is not an integer >= 1.
    """
    ### BEGIN SOLUTION
    if isinstance(n_head, bool) or not isinstance(n_head, numbers.Integral) or n_head < 1:
        raise ValueError(f"n_head must be an integer >= 1, got {n_head!r}")
    exponents = np.arange(1, n_head + 1) / n_head
    return 2.0 ** (-8.0 * exponents)
    ### END SOLUTION
'''

MODULE = '''"""Bonus exercise `alibi`: ALiBi's head slopes, in NumPy."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from ..core.assertions import CheckFailed, assert_close, assert_shape, expect_value_error
from ..core.diagnose import matches
from ..core.exercise import Exercise, positive_int

EX = Exercise("alibi", functions=("alibi_slopes",), framework="numpy", track="bonus",
              points=6, order=13, title="`alibi_slopes(n_head)`: ALiBi's head slopes")


# -- reference ----------------------------------------------------------------------------------
@EX.reference
def alibi_slopes(n_head):
    n_head = positive_int(n_head, "n_head", 1)
    heads = torch.arange(1, n_head + 1, dtype=torch.float64)
    return torch.pow(2.0, heads * (-8.0 / n_head)).numpy()


# -- strategies ---------------------------------------------------------------------------------
heads = st.integers(1, 16)


# -- checks -------------------------------------------------------------------------------------
def student_slopes(ctx, n_head):
    slopes = assert_shape(ctx.student.alibi_slopes(n_head), (n_head,), "the slopes")
    if slopes.dtype != np.float64:
        raise CheckFailed(f"the slopes have dtype {slopes.dtype}, expected float64")
    return slopes


@EX.check(points=1, prop="alibi_slopes(n_head) is float64 of shape (n_head,).")
@given(n_head=heads)
def test_shape_and_dtype(ctx, n_head):
    student_slopes(ctx, n_head)


@EX.check(points=2, prop="Head h of n_head has the slope 2 ** (-8 h / n_head).")
@given(n_head=heads)
def test_matches_torch(ctx, n_head):
    assert_close(student_slopes(ctx, n_head), alibi_slopes(n_head))


@EX.check(points=1, prop="The last head's slope is 2 ** -8, whatever n_head.")
@given(n_head=heads)
def test_last_slope(ctx, n_head):
    assert_close(student_slopes(ctx, n_head)[-1], 2.0 ** -8, what="the last slope")


@EX.check(points=1, prop="n_head < 1, or not an integer, raises ValueError.")
def test_rejects_bad_n_head(ctx):
    for n_head in (0, -2, 2.0, True):
        ctx.show(n_head=n_head)
        expect_value_error(lambda n=n_head: ctx.student.alibi_slopes(n), f"n_head = {n_head!r}")


# What must use its input (a kit that judges the checks' own calls declares it with
# EX.judge_input; before it, with informative inputs drawn as the checks draw theirs).
if hasattr(EX, "judge_input"):
    EX.judge_input("alibi_slopes")
else:
    EX.informative_inputs("alibi_slopes")(
        lambda draw, calls: [(draw(st.integers(2, 16)),) for _ in range(calls)])


### BEGIN HIDDEN CHECKS
def alibi_structures(rng):
    """One head, and several."""
    return [{"n_head": 1}, {"n_head": int(rng.integers(2, 17))}]


@EX.check(points=1, hidden=True, cases=alibi_structures,
          prop="alibi_slopes agrees with the answer key.")
@given(n_head=heads)
def test_alibi_matches_answer_key(ctx, n_head):
    assert_close(ctx.student.alibi_slopes(n_head), ctx.key.alibi_slopes(n_head))
### END HIDDEN CHECKS


# -- misconceptions -----------------------------------------------------------------------------
EX.misconception(
    "alibi-slopes-from-zero",
    mistake="counts the heads from 0, so the first head's slope is 1",
    hint="head h runs from 1 to n_head: the first slope is 2 ** (-8 / n_head), the last 2 ** -8.",
)


def from_zero(n_head):
    """The slopes with the heads counted from 0, by torch."""
    n_head = positive_int(n_head, "n_head", 1)
    return [torch.pow(2.0, torch.arange(n_head, dtype=torch.float64) * (-8.0 / n_head)).numpy()]


@EX.probe("alibi-slopes-from-zero", explains=("test_matches_torch", "test_last_slope"),
          mistaken={"alibi_slopes": from_zero})
def probe_from_zero(student) -> bool:
    return matches(student.alibi_slopes(4), from_zero(4)[0])
'''

# The zoo: each wrong entry as its author writes it (the key with the mistake made in it), and
# the misconception it names; the correct one as a whole file.
MISTAKES = {
    "alibi_from_zero": (
        "    exponents = np.arange(1, n_head + 1) / n_head\n",
        "    exponents = np.arange(n_head) / n_head  # BUG: counts the heads from 0\n",
        MISCONCEPTION),
    "alibi_no_validation": (
        "    if isinstance(n_head, bool) or not isinstance(n_head, numbers.Integral) "
        "or n_head < 1:\n",
        "    if n_head < 1:  # BUG: takes 2.0 and True for a number of heads\n", None),
    "alibi_float32": (
        "    return 2.0 ** (-8.0 * exponents)\n",
        "    return (2.0 ** (-8.0 * exponents)).astype(np.float32)  # BUG: float32 slopes\n",
        None),
}
CORRECT = '''# zoo: alibi
"""ALiBi's slopes as a geometric sequence: np.logspace in base 2."""

import numbers

import numpy as np


def alibi_slopes(n_head):
    if type(n_head) is bool or not isinstance(n_head, numbers.Integral):
        raise ValueError("n_head: an integer")
    if n_head <= 0:
        raise ValueError("n_head: at least one head")
    return np.logspace(-8.0 / n_head, -8.0, num=n_head, base=2.0)
'''


def blocks(text: str) -> dict[str, list[str]]:
    """The page's marked command blocks (``<!-- guide: NAME -->`` over a fenced block), each
    as its commands: lines joined where one ends in a backslash."""
    found = {}
    for match in re.finditer(r"<!-- guide: ([\w-]+) -->\n *```sh\n(.*?)\n *```", text, re.S):
        lines = [line.strip() for line in match[2].replace("\\\n", " ").splitlines()]
        found[match[1]] = [re.sub(r" +", " ", line) for line in lines if line]
    return found


def digests(root: Path) -> dict[str, str]:
    """sha256 of every file of the kit's copy but its caches and ``.venv``."""
    skip = {".venv", "__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache", "build",
            "dist", "attention_kit.egg-info"}
    return {path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*"))
            if path.is_file() and not skip & set(path.relative_to(root).parts)}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def test_the_page_marks_the_commands_it_gives():
    found = blocks(GUIDE.read_text())
    assert set(found) == {"zoo-entry", "check"}
    assert len(found["zoo-entry"]) == 2 and "--names <misconception>" in found["zoo-entry"][0]
    assert found["check"][1] == "make regenerate EXERCISE=<name>"
    assert any("pytest" in line and "--exercise <name>" in line for line in found["check"])
    used = set(re.findall(r"<[\w.-]+>", " ".join(found["zoo-entry"] + found["check"])))
    assert used == {"<name>", "<entry>", "<mistaken.py>", "<misconception>"}  # what it fills


def test_an_exercise_added_as_the_guide_says_passes_the_tests_it_names(tmp_path):
    kit = kit_copy.make(tmp_path / "kit")
    before = digests(kit)
    steps = blocks((kit / "docs" / "contributing.md").read_text())
    # 1, 2: the key and the module; 3: the zoo (the wrong entries with the page's command)
    (kit / "solutions" / f"{NAME}.py").write_text(KEY)
    (kit / "grader" / "problems" / f"{NAME}.py").write_text(MODULE)
    (kit / "tests" / "zoo" / "correct" / "alibi_logspace.py").write_text(CORRECT)
    named, unnamed = steps["zoo-entry"]
    for entry, (old, new, misconception) in MISTAKES.items():
        assert KEY.count(old) == 1, entry
        mistaken = tmp_path / f"{entry}.py"
        mistaken.write_text(KEY.replace(old, new))
        command = (named if misconception else unnamed).replace("<name>", NAME).replace(
            "<entry>", entry).replace("<mistaken.py>", str(mistaken)).replace(
            "<misconception>", misconception or "")
        done = kit_copy.run(kit, command)
        assert done.returncode == 0, f"{command}\n{done.stdout}"
    by_hand = set(digests(kit)) - set(before)

    for command in steps["check"]:
        command = command.replace("<name>", NAME)
        start, cpu = time.monotonic(), _children_cpu()
        done = kit_copy.run(kit, command, timeout=900)
        print(f"{command.split(' tests/')[0]}: {time.monotonic() - start:.0f} s, "
              f"{_children_cpu() - cpu:.0f} s of CPU")
        assert done.returncode == 0, f"{command}\n{done.stdout[-6000:]}"

    assert by_hand == {f"solutions/{NAME}.py", f"grader/problems/{NAME}.py",
                       "tests/zoo/correct/alibi_logspace.py",
                       *(f"tests/zoo/wrong/{entry}.patch" for entry in MISTAKES)}
    after = digests(kit)
    written = {name for name in after if before.get(name) != after[name]} - by_hand
    derived = re.compile(r"exercises/alibi\.py|README\.md|docs/\w+\.md|tests/golden/.*")
    assert [name for name in written if not derived.fullmatch(name)] == []
    assert {f"tests/golden/zoo/{entry}.{ext}" for entry in [*MISTAKES, "alibi_logspace"]
            for ext in ("json", "txt")} <= written
    assert "exercises/alibi.py" in written and "README.md" in written
    readme = (kit / "README.md").read_text()
    assert "the head slopes of ALiBi (attention with linear biases)" in readme
    assert "| `alibi` | `alibi.py` | `alibi_slopes(n_head)`: ALiBi's head slopes |" in \
        (kit / "docs" / "students.md").read_text()
