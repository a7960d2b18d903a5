"""What a fork costs: the images a class's forks are taken from (the torch zygote, a batch's
grading process) are put into 2 MiB pages (``zygote.huge_pages``), and nothing in them changes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from grader.sandbox.zygote_client import Zygote

PROBE = textwrap.dedent("""
    import hashlib, os, sys
    from grader.sandbox.zygote import huge_pages

    def huge():
        for line in open("/proc/self/smaps_rollup"):
            if line.startswith("AnonHugePages:"):
                return int(line.split()[1]) << 10

    held = bytearray(os.urandom(1 << 20) * 64)  # 64 MiB, every page written
    digest = hashlib.sha256(held).hexdigest()
    before = huge()
    done = huge_pages()
    pid = os.fork()
    if pid == 0:  # a child reads what its parent holds
        os._exit(0 if hashlib.sha256(held).hexdigest() == digest else 1)
    _, status = os.waitpid(pid, 0)
    print(done, huge() - before, status, hashlib.sha256(held).hexdigest() == digest)
""")


def collapsed(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as handle:
        for line in handle:
            if line.startswith("AnonHugePages:"):
                return int(line.split()[1]) << 10
    return 0


def test_huge_pages_collapses_the_heap_and_changes_nothing_in_it():
    found = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                           check=True).stdout.split()
    done, gained, status, same = int(found[0]), int(found[1]), int(found[2]), found[3]
    assert status == 0 and same == "True"  # the parent's bytes, and its child's, unchanged
    if done == 0:
        pytest.skip("this kernel collapses no memory into huge pages (MADV_COLLAPSE)")
    assert done >= 32 << 20 and gained >= 32 << 20


def test_a_zygote_for_a_class_is_in_huge_pages_and_one_for_a_single_grade_is_not():
    many, one = Zygote("torch", many=True), Zygote("torch")
    try:
        many.wait_ready()
        one.wait_ready()
        if collapsed(many.process.pid) == 0:
            pytest.skip("this kernel collapses no memory into huge pages (MADV_COLLAPSE)")
        assert collapsed(many.process.pid) >= 64 << 20  # most of torch's heap
        assert collapsed(one.process.pid) < 16 << 20  # `grade` does not pay for a collapse
    finally:
        many.close()
        one.close()


def test_a_batch_asks_for_zygotes_for_a_class(monkeypatch):
    import gc

    from grader.core import run
    from grader.sandbox import zygote

    asked = []
    monkeypatch.setattr(run.isolation, "start_zygote", lambda *a, **k: asked.append(k))
    monkeypatch.setattr(zygote, "huge_pages", lambda: 0)
    try:
        run.GradingRun(key=None).start_class()  # what batch.run sets up
    finally:
        gc.unfreeze()
    assert asked == [{"many": True}]


def test_the_bench_times_workers_from_both_zygotes_and_puts_the_run_s_back(capsys):
    from grader.sandbox import zygote_client
    from tools import bench_costs

    before = zygote_client._ZYGOTES.get("torch")
    figures = bench_costs.fork_cost(workers=3, rounds=1)
    assert set(figures) == {"huge", "plain"} and all(ms > 0 for ms in figures.values())
    assert zygote_client._ZYGOTES.get("torch") is before
    assert "a torch worker's start and stop" in capsys.readouterr().out
