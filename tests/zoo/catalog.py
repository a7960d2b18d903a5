"""The zoo's one catalog: entry -> (exercise, file, expected misconception, wrong or correct).

A zoo submission is a copy of the answer key (``solutions/``) with the entry's file in place of
one exercise's file. Wrong entries are patches of the key, ``wrong/<name>.patch`` (unified
diffs whose added lines carry a ``# BUG:`` comment), so they follow the key and fail loudly
when it changes under them; correct entries are whole files, ``correct/<name>.py``, written in
a style unlike the key's.
"""

from __future__ import annotations

import difflib
import multiprocessing
import re
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ZOO = Path(__file__).resolve().parent
KEY = ZOO.parent.parent / "solutions"


@dataclass(frozen=True)
class Entry:
    name: str
    exercise: str
    kind: str  # "wrong" or "correct"
    expect: str | None = None  # the misconception id the grader must name, if the table has one

    @property
    def file(self) -> Path:
        """A wrong entry's patch of the key's file, or a correct entry's whole file."""
        return ZOO / self.kind / f"{self.name}{'.patch' if self.kind == 'wrong' else '.py'}"

    def source(self) -> str:
        """The exercise file this entry submits."""
        if self.kind == "wrong":
            return apply_patch((KEY / f"{self.exercise}.py").read_text(), self.file.read_text())
        return self.file.read_text()

    @property
    def what(self) -> str:
        """The entry's one-line description: its ``# BUG:`` comment, or its docstring."""
        text = self.source()
        if "# BUG:" in text:
            return text.split("# BUG:", 1)[1].splitlines()[0].strip()
        return text.split('"""', 2)[1].split("\n")[0].strip()


def _wrong(name: str, exercise: str, expect: str | None = None) -> Entry:
    return Entry(name, exercise, "wrong", expect)


def _correct(name: str, exercise: str) -> Entry:
    return Entry(name, exercise, "correct")


ENTRIES: tuple[Entry, ...] = (
    # -- the misconceptions the grader must name -----------------------------------------------
    _wrong("softmax_overflow", "softmax", "softmax-overflow"),
    _wrong("softmax_wrong_axis", "softmax", "softmax-wrong-axis"),
    _wrong("softmax_fully_masked", "softmax", "fully-masked-row"),
    _wrong("backward_diagonal", "softmax_backward", "softmax-backward-diagonal"),
    _wrong("attention_causal_diagonal", "attention", "causal-mask-diagonal"),
    _wrong("attention_mask_after_softmax", "attention", "mask-after-softmax"),
    _wrong("attention_mask_polarity", "attention", "mask-polarity"),
    _wrong("attention_fully_masked", "attention", "fully-masked-row"),
    _wrong("heads_split_scrambled", "heads", "head-split-scrambled"),
    _wrong("mha_params_grow", "mha", "params-grow-with-heads"),
    _wrong("mha_scale_by_d_model", "mha", "scale-by-d-model"),
    _wrong("mha_head_averaged", "mha", "head-averaged-weights"),
    _wrong("mha_split_scrambled", "mha", "head-split-scrambled"),
    _wrong("mha_mask_after_softmax", "mha", "mask-after-softmax"),
    _wrong("mha_mask_polarity", "mha", "mask-polarity"),
    _wrong("mha_fully_masked", "mha", "fully-masked-row"),
    _wrong("kv_upper_left", "kv_cache", "kv-cache-upper-left"),
    # -- wrong in ways the table does not name: caught by the checks, named by nothing -------
    _wrong("softmax_no_exp", "softmax"),
    _wrong("softmax_always_float64", "softmax"),
    _wrong("softmax_accepts_nan", "softmax"),
    _wrong("softmax_no_dtype_check", "softmax"),
    _wrong("softmax_epsilon", "softmax"),
    _wrong("backward_wrong_axis", "softmax_backward"),
    _wrong("backward_no_shape_check", "softmax_backward"),
    _wrong("backward_always_float64", "softmax_backward"),
    _wrong("backward_sign_flipped", "softmax_backward"),
    _wrong("attention_causal_off_by_one", "attention"),
    _wrong("attention_causal_no_validation", "attention"),
    _wrong("attention_scale_by_dk", "attention"),
    _wrong("attention_keys_as_values", "attention"),
    _wrong("attention_always_causal", "attention"),
    _wrong("attention_boolean_index_mask", "attention"),
    _wrong("attention_mask_cast_to_bool", "attention"),
    _wrong("attention_torch_no_validation", "attention"),
    _wrong("heads_merge_no_transpose", "heads"),
    _wrong("heads_no_validation", "heads"),
    _wrong("mha_no_output_projection", "mha"),
    _wrong("mha_bias_ignored", "mha"),
    _wrong("mha_detached_weights", "mha"),
    _wrong("mha_always_causal", "mha"),
    _wrong("mha_mask_2d_only", "mha"),
    _wrong("mha_no_divisibility_check", "mha"),
    _wrong("kv_blocks_self", "kv_cache"),
    _wrong("kv_int_mask", "kv_cache"),
    _wrong("kv_no_validation", "kv_cache"),
    # -- correct, in styles unlike the key: never lose a point, never named ------------------
    _correct("softmax_logsumexp", "softmax"),
    _correct("softmax_loops_float64", "softmax"),
    _correct("backward_jacobian_loops", "softmax_backward"),
    _correct("attention_einsum_float64", "attention"),
    _correct("heads_slices", "heads"),
    _correct("mha_nanogpt", "mha"),
    _correct("kv_cache_tri", "kv_cache"),
)
BY_NAME = {e.name: e for e in ENTRIES}
WRONG = tuple(e for e in ENTRIES if e.kind == "wrong")
CORRECT = tuple(e for e in ENTRIES if e.kind == "correct")
NAMED = tuple(e for e in WRONG if e.expect)


def build(entry: Entry, folder: Path) -> Path:
    """Write the entry's submission into ``folder``: the key, with one file replaced."""
    submission = Path(folder) / entry.name
    submission.mkdir(parents=True)
    for path in sorted(KEY.glob("*.py")):
        shutil.copyfile(path, submission / path.name)
    (submission / f"{entry.exercise}.py").write_text(entry.source())
    return submission


def make_patch(old: str, new: str, name: str) -> str:
    """A unified diff from ``old`` to ``new`` (two lines of context)."""
    return "".join(difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True),
        f"solutions/{name}", f"solutions/{name}", n=2,
    ))


def apply_patch(old: str, patch: str) -> str:
    """Apply a unified diff made by ``make_patch``; every hunk must match the key exactly, so a
    change to the key that a wrong entry no longer fits fails loudly instead of drifting."""
    lines = old.splitlines(keepends=True)
    out: list[str] = []
    position = 0  # next line of ``old`` not yet copied
    hunks = re.split(r"^(@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@.*\n)", patch, flags=re.M)
    for header_start, body in zip(hunks[2::3], hunks[3::3]):
        start = int(header_start) - 1 if int(header_start) else 0
        out += lines[position:start]
        position = start
        for line in body.splitlines(keepends=True):
            tag, text = line[:1], line[1:]
            if tag in (" ", "-"):
                if position >= len(lines) or lines[position] != text:
                    raise ValueError(f"patch does not fit the key at line {position + 1}")
                position += 1
                if tag == " ":
                    out.append(text)
            elif tag == "+":
                out.append(text)
            elif line.startswith("\\"):
                continue
    return "".join(out + lines[position:])


def grade_entry(entry: Entry):
    """Grade the entry's submission as a student's is graded: all six core exercises, the real
    grading profile (shrinking included) and the default limits."""
    from grader.engine import grade_submission
    from grader.exercises import EXERCISE_NAMES

    with tempfile.TemporaryDirectory(prefix="zoo-") as tmp:
        return grade_submission(build(entry, Path(tmp)), exercises=EXERCISE_NAMES)


def grade_many(entries, *, processes: int = 2) -> dict:
    """Grade every entry in full, ``processes`` entries at a time."""
    if processes <= 1:
        return {e.name: grade_entry(e) for e in entries}
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(processes, mp_context=context) as pool:
        futures = {e.name: pool.submit(grade_entry, e) for e in entries}
        return {name: future.result() for name, future in futures.items()}
