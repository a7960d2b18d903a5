"""A class graded in shards: slices every task agrees on, K and N from Slurm or Kubernetes,
merge byte-identical to one batch, a missing shard named, and the node's isolation checked.
No Slurm here: tests/test_slurm.py runs the same on a real one-node cluster."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path

import pytest
from submission_tools import EXERCISES, KIT, make_submission

from grader.core import records
from grader.core.results import StudentRecord
from grader.integrations.outputs import inert
from grader.integrations.routes import cli, shards
from grader.sandbox import node

STUBS = KIT / "exercises"


# -- slices and K/N ---------------------------------------------------------------------------
def test_slices_cover_every_folder_once_in_order_and_differ_by_one_at_most():
    for total in range(0, 23):
        items = [f"s{i:02d}" for i in range(total)]
        for count in range(1, 8):
            parts = [shards.select(items, shards.Shard(k, count)) for k in range(count)]
            assert [x for part in parts for x in part] == items
            assert max(map(len, parts)) - min(map(len, parts)) <= 1
            for position, item in enumerate(items):
                assert item in parts[shards.owner(position, total, count)]


@pytest.mark.parametrize(("shard", "shards_", "environ", "expected"), [
    ("2/3", None, {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "9"}, (2, 3)),
    (None, None, {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "3"}, (1, 3)),
    # an array 1-4: K counts from its first index
    (None, None, {"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "1",
                  "SLURM_ARRAY_TASK_MAX": "4"}, (3, 4)),
    (None, 5, {"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "1"}, (4, 5)),  # a rerun
    (None, 4, {"JOB_COMPLETION_INDEX": "3"}, (3, 4)),
    (None, None, {}, None),
])
def test_shard_comes_from_the_option_then_slurm_then_kubernetes(shard, shards_, environ,
                                                                 expected):
    chosen = shards.choose(shard, shards_, environ)
    assert (chosen and (chosen.index, chosen.count)) == expected


@pytest.mark.parametrize(("shard", "shards_", "environ", "message"), [
    ("3/3", None, {}, "shard 3 of 3 does not exist"),
    ("1-3", None, {}, "write K/N"),
    ("a/3", None, {}, "not a whole number"),
    ("0/3", 3, {}, "not both"),
    (None, 3, {}, "needs the task's index"),
    (None, None, {"JOB_COMPLETION_INDEX": "0"}, "pass --shards N"),
    (None, None, {"SLURM_ARRAY_TASK_ID": "3"}, "pass --shards N"),
    (None, 2, {"JOB_COMPLETION_INDEX": "2"}, "shard 2 of 2 does not exist"),
])
def test_a_shard_that_cannot_be_chosen_is_refused_with_the_reason(shard, shards_, environ,
                                                                  message):
    with pytest.raises(shards.ShardError, match=message):
        shards.choose(shard, shards_, environ)


def test_a_shard_writes_results_only_and_a_slurm_task_does_not_grade_the_whole_class(
        tmp_path, monkeypatch, capsys):
    (tmp_path / "class" / "ada").mkdir(parents=True)
    root = str(tmp_path / "class")
    assert cli.main(["batch", root, "--shard", "0/2"]) == 2
    assert "needs --json-dir" in capsys.readouterr().err
    assert cli.main(["batch", root]) == 2
    assert "batch needs --csv" in capsys.readouterr().err
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "1")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "4")
    assert cli.main(["batch", root, "--csv", str(tmp_path / "g.csv"),
                     "--json-dir", str(tmp_path / "json")]) == 2
    error = capsys.readouterr().err
    assert "shard 1 of 4 writes --json-dir only, not --csv" in error and "merge" in error
    assert not (tmp_path / "g.csv").exists() and not (tmp_path / "json").exists()


# -- merge ------------------------------------------------------------------------------------
def small_course(path: Path) -> Path:
    """softmax alone: a class graded in seconds."""
    path.write_text("".join(f"[exercises.{name}]\nenabled = false\n\n"
                            for name in EXERCISES if name != "softmax"))
    return path


def small_class(root: Path) -> list[str]:
    make_submission(root / "ada")
    make_submission(root / "bob-stubs", base=STUBS)
    make_submission(root / "cy-no-max", {"softmax.py": """\
        import numpy as np


        def softmax(logits, axis=-1):
            e = np.exp(logits)
            return e / e.sum(axis=axis, keepdims=True)
        """})
    (root / "dee-empty").mkdir()
    make_submission(root / "eve-exits", {"softmax.py": """\
        def softmax(logits, axis=-1):
            raise SystemExit(9)
        """})
    (root / "stray.txt").write_text("not a student\n")
    return ["ada", "bob-stubs", "cy-no-max", "dee-empty", "eve-exits"]


OUTPUTS = ("grades.csv", "report/summary.json", "report/summary.md", "report/index.html")


def test_merge_of_the_shards_is_byte_identical_to_one_batch_and_names_a_missing_shard(
        tmp_path, capsys):
    root = tmp_path / "class"
    students = small_class(root)
    course = str(small_course(tmp_path / "course.toml"))
    common = ["--course", course, "--timeout", "10", "--jobs", "2"]
    whole = tmp_path / "whole"
    assert cli.main(["batch", str(root), "--csv", str(whole / "grades.csv"),
                     "--report", str(whole / "report"), *common]) == 0
    results = tmp_path / "results"
    for k in (0, 2):  # shard 1 of 3 never runs
        assert cli.main(["batch", str(root), "--shard", f"{k}/3", "--json-dir", str(results),
                         *common]) == 0
    part = tmp_path / "part"
    merge = ["merge", str(results), "--submissions", str(root), "--course", course]
    assert cli.main([*merge, "--csv", str(part / "grades.csv"), "--report",
                     str(part / "report")]) == 0
    with open(part / "grades.csv", newline="") as handle:
        status = {row["student"]: row["status"] for row in csv.DictReader(handle)}
    missing = shards.select(students, shards.Shard(1, 3))
    assert missing == ["bob-stubs", "cy-no-max"]
    assert {s for s, why in status.items() if why.startswith("not graded")} == set(missing)
    assert {status[s] for s in missing} == {"not graded: no result (shard 1 of 3)"}
    assert list(status) == students  # the stray file is no student here either
    statuses = json.loads((part / "report" / "summary.json").read_text())["statuses"]
    assert statuses["no result"] == {"count": 2, "students": missing}

    assert cli.main(["batch", str(root), "--shard", "1/3", "--json-dir", str(results),
                     *common]) == 0  # the rerun of the missing shard
    merged = tmp_path / "merged"
    assert cli.main([*merge, "--csv", str(merged / "grades.csv"),
                     "--report", str(merged / "report")]) == 0
    for name in OUTPUTS:
        assert (merged / name).read_bytes() == (whole / name).read_bytes(), name
    assert sorted(p.name for p in results.glob("*.json")) == [
        f"{s}.json" for s in students if s != "dee-empty"]  # as batch --json-dir writes them
    summary = json.loads((whole / "report" / "summary.json").read_text())
    assert summary["class"]["students"] == 5 and "no result" not in summary["statuses"]
    capsys.readouterr()


def test_merge_keeps_a_row_for_every_student_whatever_the_results_hold(tmp_path):
    root = tmp_path / "class"
    long, latin1 = "x" * 250, b"caf\xe9".decode("utf-8", "surrogateescape")  # as os.listdir
    for name in ("a", "b", "c", "d", long, latin1):
        (root / name).mkdir(parents=True)
    results = tmp_path / "results"
    record = shards.recorder(results, shards.Shard(0, 2))
    for name in ("a", long, latin1, "zed"):  # zed: graded once, its folder since removed
        record(StudentRecord(inert.name(name), "empty", "empty"))  # as batch names each folder
    rows_folder = results / records.FOLDER
    (rows_folder / "b.json").write_text("{not json")
    (rows_folder / ".tmp-123-0").write_text("half")  # a task killed while writing
    rows = shards.merge(results, root, warnings=None)
    assert [r.student for r in rows] == ["a", "b", "c", "caf\\xe9", "d", long]  # sorted
    assert [rows[0], rows[3], rows[5]] == [StudentRecord(n, "empty", "empty")
                                           for n in ("a", "caf\\xe9", long)]
    assert rows[1].status.startswith("not graded: unreadable record b.json")
    assert (rows[2].status, rows[4].status) == ("not graded: no result (shard 0 of 2)",
                                                "not graded: no result (shard 1 of 2)")


# -- the node's isolation ---------------------------------------------------------------------
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_as_root_the_node_isolates_and_rows_say_nothing_more():
    found = node.check()
    assert (found.namespaces, found.isolated, found.label()) == ("root", True, "")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_as_another_user_the_check_names_what_the_workers_have():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            os.setgid(65534)
            os.setuid(65534)
            found = node.check()
            os.write(write, json.dumps([found.namespaces, found.enforced, found.missing,
                                        found.label(True)]).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as handle:
        namespaces, enforced, missing, label = json.loads(handle.read())
    os.waitpid(pid, 0)
    assert namespaces in ("user", "")  # never root's: no uid of its own per worker
    assert label.startswith(("user namespaces, " if namespaces else "no namespaces, ") + enforced)
    assert bool(missing) == (not namespaces)  # only namespaces are needed to grade at all


def test_a_node_without_namespaces_refuses_unless_trusted_and_rows_name_it(
        tmp_path, monkeypatch, capsys):
    weak = node.NodeIsolation("", "rlimits", (), ["no namespaces (...)"])
    monkeypatch.setattr(node, "check", lambda: weak)
    (tmp_path / "class" / "ada").mkdir(parents=True)  # empty: no worker needed
    args = ["batch", str(tmp_path / "class"), "--csv", str(tmp_path / "grades.csv"),
            "--course", str(small_course(tmp_path / "course.toml"))]
    assert cli.main(args) == 2
    error = capsys.readouterr().err
    assert "cannot isolate" in error and "no namespaces (...)" in error
    assert "--trust-submissions" in error and not (tmp_path / "grades.csv").exists()
    assert cli.main([*args, "--trust-submissions"]) == 0
    assert (tmp_path / "grades.csv").read_text().splitlines()[1] == (
        'ada,,,"empty (isolation: no namespaces, rlimits; no CPU share; --trust-submissions)",')
    # A user's node with user namespaces grades at once (4e1a685 refused it: "per-worker
    # cgroups need root ... pass --trust-submissions"), and says what held.
    monkeypatch.setattr(node, "check", lambda: node.NodeIsolation("user", "rlimits", ()))
    assert cli.main(args) == 0
    assert "Isolation: user namespaces, rlimits; no CPU share" in capsys.readouterr().err
    assert (tmp_path / "grades.csv").read_text().splitlines()[1] == (
        'ada,,,"empty (isolation: user namespaces, rlimits; no CPU share)",')
    delegated = node.NodeIsolation("user", "delegated cgroups")
    assert delegated.isolated and delegated.label() == "user namespaces, delegated cgroups"
    assert node.NodeIsolation("root").label() == ""  # root and all three controllers


# -- the Slurm scripts ------------------------------------------------------------------------
def test_slurm_writes_an_array_of_shards_and_a_merge_after_it(tmp_path, capsys):
    (tmp_path / "class").mkdir()
    out = tmp_path / "shared"
    assert cli.main(["slurm", str(tmp_path / "class"), "--shards", "4", "--out", str(out),
                     "--partition", "short", "--time", "0:30:00", "--cpus-per-task", "3",
                     "--mem", "8G", "--timeout", "20", "--account", "cs101", "--qos", "low",
                     "--constraint", "avx2", "--throttle", "2", "--merge-mem", "2G",
                     "--sbatch-arg=--mail-type=END", "--sbatch-arg=--nice=10"]) == 0
    grade, merge = (out / "grade.sbatch").read_text(), (out / "merge.sbatch").read_text()
    shared = ["#SBATCH --partition=short", "#SBATCH --time=0:30:00", "#SBATCH --account=cs101",
              "#SBATCH --qos=low", "#SBATCH --constraint=avx2", "#SBATCH --mail-type=END",
              "#SBATCH --nice=10"]
    for line in ("#SBATCH --array=0-3%2", "#SBATCH --cpus-per-task=3", "#SBATCH --mem=8G",
                 f"#SBATCH --output={out}/logs/grade-%A_%a.out", *shared):
        assert line in grade.splitlines()
    for line in ("#SBATCH --mem=2G", f"#SBATCH --output={out}/logs/merge-%j.out", *shared):
        assert line in merge.splitlines()
    # the files say where logs and results go
    assert f"Log: {out}/logs/grade-<job>_<task>.out" in grade and f"{out}/results" in grade
    assert f"writes {out}/grades.csv and {out}/report" in merge
    command = grade.splitlines()[-1]
    assert " batch " in command and '--shard "${SLURM_ARRAY_TASK_ID}/4"' in command
    assert f"--json-dir {out}/results" in command and "--timeout 20" in command
    assert command.endswith('--jobs "${SLURM_CPUS_PER_TASK:-3}"')
    assert f" merge {out}/results --submissions {tmp_path}/class --csv {out}/grades.csv" \
        f" --report {out}/report" in merge
    for text in (grade, merge):
        assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    # the merge runs once every task ended, however: a failed task never strands it
    assert "--dependency=afterany:$grade" in capsys.readouterr().out
    for bad in (["--throttle", "0"], ["--sbatch-arg", "mail-type=END"], ["--account", "a b"]):
        assert cli.main(["slurm", str(tmp_path / "class"), "--shards", "4", "--out",
                         str(tmp_path / "other"), *bad]) == 2
    record = shards.recorder(out / "results", shards.Shard(0, 4))
    record(StudentRecord("ada", "empty", "empty"))
    assert cli.main(["slurm", str(tmp_path / "class"), "--shards", "4", "--out", str(out),
                     "--submit"]) == 2  # before sbatch: merge would mix the two runs
    assert "already holds 1 student's results" in capsys.readouterr().err


def test_slurm_submits_the_merge_after_any_end_of_the_array(tmp_path, monkeypatch, capsys):
    from grader.integrations.routes import slurm

    (tmp_path / "class").mkdir()
    submitted = []
    monkeypatch.setattr(slurm, "sbatch", lambda *words: submitted.append(words) or
                        str(4242 + len(submitted)))
    assert cli.main(["slurm", str(tmp_path / "class"), "--shards", "2", "--out",
                     str(tmp_path / "shared"), "--submit"]) == 0
    assert submitted == [(str(tmp_path / "shared" / "grade.sbatch"),),
                         ("--dependency=afterany:4243", str(tmp_path / "shared" / "merge.sbatch"))]
    assert "grade job: 4243\nmerge job: 4244" in capsys.readouterr().out
