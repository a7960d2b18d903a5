"""The bug zoo: every wrong implementation is caught, every named one diagnosed, every correct
one left alone, and every check, core and bonus, is seen to fail at least once.

Each zoo submission is the key with one exercise file replaced, graded with the real grading
profile and limits as a student's submission is: a core entry with all the core exercises, a
bonus entry on its own exercise (``zoo.catalog.graded_exercises``).
"""

from __future__ import annotations

import subprocess

import pytest
from submission_tools import COURSE, EXERCISES
from zoo.catalog import (
    BY_NAME,
    CORRECT,
    ENTRIES,
    KEY,
    NAMED,
    WRONG,
    apply_patch,
    build,
    graded_exercises,
    make_patch,
)

from grader.core.delegation_verdicts import violations
from grader.core.diagnose import catalog, feedback_line
from grader.integrations.outputs import report


def ids(entries):
    return [e.name for e in entries]


def test_catalog_covers_every_misconception_and_every_exercise():
    assert {e.expect for e in NAMED} == set(catalog())
    assert {e.exercise for e in WRONG} == {e.exercise for e in CORRECT} == set(COURSE.names())
    assert len(WRONG) - len(NAMED) >= 12
    for entry in WRONG:
        text = entry.source()  # the key's file with the entry's patch applied, or a whole file
        assert text != (KEY / f"{entry.exercise}.py").read_text(), entry.name
        if entry.file.suffix == ".patch":
            assert "# BUG:" in text, entry.name


def test_a_patch_that_no_longer_fits_the_key_fails_loudly():
    entry = BY_NAME["attention_mask_after_softmax"]
    key = (KEY / "attention.py").read_text()
    moved = key.replace("scores = np.where(mask, -np.inf, scores)", "scores[mask] = -np.inf")
    assert moved != key
    with pytest.raises(ValueError, match="does not fit the key"):
        apply_patch(moved, entry.file.read_text().split("\n", 1)[1])


def test_make_zoo_grades_one_exercise_when_asked():
    from zoo import matrix

    run = subprocess.run(["make", "-n", "zoo", "EXERCISE=rope"], cwd=KEY.parent,
                         capture_output=True, text=True, timeout=60)
    assert "tests/zoo/matrix.py --exercise rope" in run.stdout, run.stdout + run.stderr
    rope = matrix.select(["rope"])
    assert rope and rope == [e for e in ENTRIES if e.exercise == "rope"]
    assert matrix.select([]) == list(ENTRIES)
    with pytest.raises(SystemExit):
        matrix.main(["--exercise", "no_such_exercise"])


PATCHES = [e for e in WRONG if e.file.suffix == ".patch"]


def test_each_patch_is_what_make_patch_writes_from_its_mistaken_file():
    """``make_patch`` (what ``python tests/zoo/catalog.py`` writes) gives each patch entry's
    whole file, its ``# zoo:`` line included, from the key and the file the entry submits."""
    for entry in PATCHES:
        key = (KEY / f"{entry.exercise}.py").read_text()
        assert make_patch(key, entry.source(), entry.exercise, entry.expect) == \
            entry.file.read_text(), entry.name


def test_write_patch_wants_the_mistake_marked(tmp_path, monkeypatch):
    from zoo import catalog

    monkeypatch.setattr(catalog, "ZOO", tmp_path)
    (tmp_path / "wrong").mkdir()
    key = (KEY / "kv_cache.py").read_text()
    mistaken = tmp_path / "kv_cache.py"
    old = "    return key_pos > query_pos\n"
    assert key.count(old) == 1
    mistaken.write_text(key.replace(old, "    return key_pos >= query_pos\n"))
    with pytest.raises(ValueError, match="# BUG:"):
        catalog.write_patch("kv_cache", "kv_blocks_self_again", mistaken)
    mistaken.write_text(key.replace(old, "    return key_pos >= query_pos  # BUG: blocks self\n"))
    path = catalog.write_patch("kv_cache", "kv_blocks_self_again", mistaken, "some-id")
    assert path == tmp_path / "wrong" / "kv_blocks_self_again.patch"
    assert path.read_text().startswith("# zoo: kv_cache names some-id\n--- solutions/")
    assert apply_patch(key, path.read_text().split("\n", 1)[1]) == mistaken.read_text()


@pytest.mark.parametrize("entry", PATCHES, ids=ids(PATCHES))
def test_a_patch_follows_the_key_when_a_line_above_it_is_wrapped(entry):
    """Wrapping one line of the key, above the patch's hunks, breaks no patch: hunks are
    applied where their text is."""
    key = (KEY / f"{entry.exercise}.py").read_text()
    patch = entry.file.read_text().split("\n", 1)[1]
    touched = {line[1:] for line in patch.splitlines(keepends=True) if line[:1] in " -"}
    line = next(line for line in key.splitlines(keepends=True)
                if len(line) > 50 and ", " in line.strip() and line not in touched
                and key.count(line) == 1)
    cut = line.index(", ") + 1
    indent = " " * (len(line) - len(line.lstrip()) + 4)
    wrapped = line[:cut] + "\n" + indent + line[cut + 1:]
    assert apply_patch(key.replace(line, wrapped), patch) == apply_patch(key, patch).replace(
        line, wrapped)


@pytest.mark.parametrize("entry", ENTRIES, ids=ids(ENTRIES))
def test_other_exercises_are_untouched_copies_of_the_key(entry, tmp_path):
    submission = build(entry, tmp_path)
    for name in COURSE.names():
        expected = entry.source() if name == entry.exercise else (KEY / f"{name}.py").read_text()
        assert (submission / f"{name}.py").read_text() == expected, name


@pytest.mark.parametrize("entry", WRONG, ids=ids(WRONG))
def test_wrong_entry_loses_points_in_its_exercise_only(entry, zoo_results):
    results = zoo_results[entry.name]
    assert sorted(results) == sorted(graded_exercises(entry))
    own = results[entry.exercise]
    exercise = EXERCISES[entry.exercise]
    if violations(entry.source(), exercise.rule, own_modules=frozenset(exercise.uses)):
        assert own.score == 0 and own.error.startswith("it uses")  # the delegation rule
    else:
        assert own.error is None, own.error  # caught by the checks, not a crash or a timeout
    assert own.score < own.max_score
    others = [e for name, e in results.items() if name != entry.exercise]
    assert all(e.score == e.max_score and not e.misconceptions for e in others)


@pytest.mark.parametrize("entry", WRONG, ids=ids(WRONG))
def test_wrong_entry_carries_exactly_its_misconception(entry, zoo_results):
    own = zoo_results[entry.name][entry.exercise]
    assert own.misconceptions == ([entry.expect] if entry.expect else [])


@pytest.mark.parametrize("entry", CORRECT, ids=ids(CORRECT))
def test_correct_entry_scores_full_marks_with_no_misconception(entry, zoo_results):
    results = zoo_results[entry.name]
    for result in results.values():
        failing = [f"{c.name}: {c.feedback}" for c in result.checks if not c.passed]
        assert result.score == result.max_score == COURSE.points(result.name), failing
        assert result.misconceptions == []


# Entries that ignore their input: uniform weights, bare or with relative noise of 1e-13 to
# 1e-6 (on 4e1a685, which compared answers bit for bit: softmax 7/15, attention 14/20), or
# raising TypeError or RuntimeError off the checks' 1/8 grid (softmax 6/15, attention 14/20).
# Each keeps at most what its other functions earn: attention's causal_mask, 3 of 20.
IGNORING = {"softmax": 2, "attention": 3}
IGNORES_INPUT = [e for e in WRONG if e.name.startswith(("softmax_uniform", "attention_uniform"))
                 or e.name.endswith("_off_grid")]


@pytest.mark.parametrize("entry", IGNORES_INPUT, ids=ids(IGNORES_INPUT))
def test_an_entry_that_ignores_its_input_earns_nothing_for_it(entry, zoo_results):
    own = zoo_results[entry.name][entry.exercise]
    assert own.score <= IGNORING[entry.exercise], [c.name for c in own.checks if c.passed]


def test_an_answer_is_judged_on_the_inputs_its_points_are_for(zoo_results, tmp_path,
                                                              monkeypatch):
    """Two honest files, each convicted on c6e9838 by calls drawn apart from the checks: a
    module with no output bias under bias=True (1/25 under a secret whose calls sent one)
    keeps the five properties it meets without it, and loses only the checks that load the
    bias; attention with no ``mask is None`` branch (NaN weights without a mask, those calls'
    only kind; 3/20) keeps the mask checks it passes, and loses only the checks it answers
    with NaN."""
    from grader.core.engine import grade_submission

    monkeypatch.setenv("ATTENTION_KIT_SECRET", "f" * 32)
    secret = grade_submission(build(BY_NAME["mha_output_bias_missing"], tmp_path),
                              exercises=["mha"]).results["mha"]
    assert secret.score == 10, [c.feedback for c in secret.checks if not c.passed]
    mha = zoo_results["mha_output_bias_missing"]["mha"]
    checks = {c.name: c for c in mha.checks}
    assert {name for name, c in checks.items() if not c.passed} == {
        "test_has_four_linear_projections", "test_parameter_count_independent_of_heads",
        "test_matches_torch_multihead_attention", "test_gradients_match_torch",
        "test_mha_matches_answer_key"}
    assert mha.score == 10
    assert "Failed: MultiHeadAttention(1, 1, bias=True) has no wo.bias, so this example's " \
           "weights cannot be loaded into it" in checks["test_gradients_match_torch"].feedback
    attention = zoo_results["attention_nan_without_mask"]["attention"]
    checks = {c.name: c for c in attention.checks}
    assert {name for name, c in checks.items() if c.passed} == {
        "test_causal_mask_blocks_exactly_the_future", "test_causal_mask_rejects_bad_t",
        "test_zero_weight_on_blocked_positions", "test_no_weight_on_future_positions",
        "test_mask_broadcasts", "test_rejects_mismatched_shapes",
        "test_rejects_non_boolean_mask", "test_rejects_query_with_no_allowed_key"}
    assert attention.score == 11
    assert "Failed: the row sums: got nan at index (0,), expected 1 (1 of 1 entry off)" in \
        checks["test_rows_sum_to_one"].feedback
    for result in (mha, attention):
        assert not any("ignores its input" in c.feedback for c in result.checks)


@pytest.mark.parametrize("exercise", COURSE.names())
def test_every_check_fails_on_some_wrong_entry(exercise, zoo_results):
    failed = {c.name for entry in WRONG if entry.exercise == exercise  # no other fails any
              for c in zoo_results[entry.name][exercise].checks if not c.passed}
    assert {c.name for c in EXERCISES[exercise].checks} - failed == set()


@pytest.mark.parametrize("entry", NAMED, ids=ids(NAMED))
def test_hint_lands_on_every_check_its_mistake_fails_and_no_other(entry, zoo_results):
    """A named entry makes one mistake: its hint is on each check it fails and on no other.
    And the probe's ``explains`` names no check this mistaken version passes, so in a file with
    other mistakes too the hint never lands on a check that failed for another reason."""
    own = zoo_results[entry.name][entry.exercise]
    hint = feedback_line(entry.expect)
    failing = {c.name for c in own.checks if not c.passed}
    assert {c.name for c in own.checks if hint in c.feedback} == failing != set()
    assert set(EXERCISES[entry.exercise].explained[entry.expect]) <= failing


def test_a_hint_stays_off_a_check_its_mistake_does_not_explain(tmp_path):
    """The mask applied after the softmax, and causal_mask(t) that accepts t = 0: the second
    failure says nothing of the first mistake."""
    from grader.core.engine import grade_submission

    text = (KEY / "attention.py").read_text()
    for old, new in [
        ("        scores = np.where(mask, -np.inf, scores)\n", ""),
        ("    weights = softmax(scores, axis=-1)\n", "    weights = softmax(scores, axis=-1)\n"
         "    weights = weights if mask is None else np.where(mask, 0.0, weights)\n"),
        ("    if isinstance(t, bool) or not isinstance(t, numbers.Integral) or t < 1:\n", ""),
        ('        raise ValueError(f"t must be a positive integer, got {t!r}")\n', ""),
    ]:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    submission = tmp_path / "two-mistakes"
    submission.mkdir()
    (submission / "attention.py").write_text(text)
    (submission / "softmax.py").write_text((KEY / "softmax.py").read_text())
    graded = grade_submission(submission, exercises=["attention"])
    result = graded.results["attention"]
    hint = feedback_line("mask-after-softmax")
    checks = {c.name: c for c in result.checks}
    assert result.misconceptions == ["mask-after-softmax"]
    assert not checks["test_causal_mask_rejects_bad_t"].passed
    assert hint not in checks["test_causal_mask_rejects_bad_t"].feedback
    assert hint in checks["test_matches_torch_sdpa"].feedback
    text = report.render(graded)
    assert text.count(hint) == 1  # once, above the checks
    assert text.count("Likely mistake: mask-after-softmax (hint above)") == len(
        [c for c in result.checks if hint in c.feedback])


def test_an_unused_bias_is_named_and_costs_no_mask_check(zoo_results):
    """A module that never adds its biases lost the per-head mask check on a mask that blocked
    nothing ("got 0.5 ... expected 0.398875": the missing query bias), with no hint anywhere. The
    mask check now judges the mask against the module's own weights, and the mistake is named."""
    own = zoo_results["mha_bias_unused"]["mha"]
    checks = {c.name: c for c in own.checks}
    assert own.misconceptions == ["bias-unused"]
    assert checks["test_per_head_mask_blocks_exactly"].passed
    hint = ("Likely mistake (bias-unused): with bias=True each projection adds its bias: call "
            "the layer itself (self.wq(x)), or add self.wq.bias when you multiply by "
            "self.wq.weight yourself.")
    assert hint in checks["test_matches_torch_multihead_attention"].feedback
    assert hint in checks["test_gradients_match_torch"].feedback
    assert own.score == 13  # the comparisons with nn.MultiheadAttention and the key only


def test_report_and_json_carry_the_diagnosis(zoo_results, tmp_path):
    from grader.core.engine import grade_submission

    entry = BY_NAME["attention_mask_polarity"]
    full = grade_submission(build(entry, tmp_path), exercises=COURSE.names("core"))
    assert full.exercises["attention"].misconceptions == [entry.expect]
    text = report.render(full)
    assert text.count(feedback_line(entry.expect)) == 1  # once, above the failing checks
    exported = report.to_json(full)
    assert exported["extra_data"]["exercises"]["attention"]["misconceptions"] == [entry.expect]
    outputs = [t["output"] for t in exported["tests"] if t["status"] == "failed"]
    assert outputs and all(feedback_line(entry.expect) in o for o in outputs)


SCORES = KEY.parent / "tests" / "zoo" / "scores.json"


def test_default_course_reproduces_the_recorded_scores(zoo_results):
    """Every check's points for every recorded zoo entry, as in tests/zoo/scores.json (written
    by the grader before exercises became modules and the rubric moved to course.toml). A
    change of checks or strategies that moves a score shows here: rerecord it on purpose with
    ``python tests/zoo/matrix.py --record``. Entries added later need no recording."""
    import json

    recorded = json.loads(SCORES.read_text())
    now = {name: {ex: {c.name: c.points for c in result.checks}
                  for ex, result in results.items()}
           for name, results in zoo_results.items()}
    assert set(recorded) <= set(now)
    assert {name: now[name] for name in recorded} == recorded
