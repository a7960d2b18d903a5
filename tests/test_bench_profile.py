"""The bench's breakdown (``tools.bench_profile``): its bookkeeping, on a clock
that only moves when told to (the bench itself is not a test)."""

from __future__ import annotations

import types

import pytest

from tools import bench_profile


@pytest.fixture
def ticks(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The time ``bench_profile`` reads: ``ticks[0]``, moved by the test."""
    now = [0.0]
    monkeypatch.setattr(bench_profile, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    return now


def test_each_part_counts_its_own_time_less_the_parts_it_calls(ticks: list[float]) -> None:
    clock = bench_profile._Clock()

    def request(op: str) -> str:
        ticks[0] += 2.0
        return op

    def diagnose() -> str:
        ticks[0] += 1.0
        reply = timed_request("probe")
        ticks[0] += 0.5
        return reply

    timed_request = clock.timed(request, "student", lambda op: f"softmax {op}")
    assert clock.timed(diagnose, "diagnosis")() == "probe"
    assert timed_request("call") == "call"
    assert clock.parts == {"diagnosis": 1.5, "student": 4.0}
    assert clock.pairs == {"softmax probe": 2.0, "softmax call": 2.0}
    assert clock.calls == {"softmax probe": 1, "softmax call": 1}


def test_a_part_that_raises_is_still_counted(ticks: list[float]) -> None:
    clock = bench_profile._Clock()

    def lost() -> None:
        ticks[0] += 3.0
        raise RuntimeError("the worker ended")

    with pytest.raises(RuntimeError):
        clock.timed(lost, "student")()
    assert clock.parts == {"student": 3.0}


def test_a_part_the_engine_no_longer_has_is_a_note_not_a_crash() -> None:
    clock = bench_profile._Clock()
    owner = types.SimpleNamespace(__name__="engine")
    clock.wrap(owner, "diagnose_renamed", "diagnosis")
    assert clock.notes == ["engine.diagnose_renamed not found: its time is in the rest"]
    assert not hasattr(owner, "diagnose_renamed")


def test_the_rows_add_up_to_the_wall_time() -> None:
    child = {"child": 9.0, "grade": 4.0, "import": 4.0, "load": 0.5, "student": 2.0,
             "drawing": 1.0, "cpu_self": 3.0, "score": 15, "notes": [],
             "pairs": {"softmax call softmax": [1.5, 144]}}
    figures = bench_profile._combine(child, total=10.0, cpu=12.0)
    rows = [figures.get(key, 0.0) for key, _ in bench_profile.PARTS]
    assert figures["interpreter"] == 1.0 and figures["rest"] == 1.5
    assert sum(rows) == pytest.approx(figures["total"])
    assert figures["request softmax call softmax"] == 1.5
    assert figures["calls softmax call softmax"] == 144
