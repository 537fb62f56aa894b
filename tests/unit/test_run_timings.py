"""Each benchmark's wall time: recorded per rank, the slowest rank's kept in results.json,
stored in the history (an older database gains the column), and turned into the expected
time of the next run (history first, else the shipped table, else none)."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest

from clusterbench import registry
from clusterbench.analyses.duration import (
    Expected,
    PastTimings,
    TimingTable,
    expected_seconds,
    pick_table,
)
from clusterbench.config import build_run_config
from clusterbench.history_db import open_history
from clusterbench.pipeline.assemble import benchmark_seconds
from clusterbench.pipeline.plan import RunPlan, expected_times, run_plan, timing_tables
from clusterbench.runtime.records import End, Record, Start, parse_record
from clusterbench.schema import Results, RunInfo, ToolInfo


def _records(seconds: dict[int, dict[str, float | None]]) -> list[Record]:
    out: list[Record] = []
    for rank, per_bench in seconds.items():
        seq = 0
        for bench, s in per_bench.items():
            out.append(Start(benchmark=bench, rank=rank, seq=seq))
            out.append(End(benchmark=bench, seconds=s, rank=rank, seq=seq + 1))
            seq += 2
    return out


def test_slowest_rank_of_each_benchmark_in_run_order() -> None:
    records = _records({0: {"gemm": 12.0, "memory": 4.0}, 1: {"gemm": 13.5, "memory": 3.0}})
    assert benchmark_seconds(records, world_size=2) == {"gemm": 13.5, "memory": 4.0}
    assert list(benchmark_seconds(records, world_size=2)) == ["gemm", "memory"]


def test_benchmarks_not_timed_on_every_rank_are_left_out() -> None:
    records = _records({0: {"gemm": 12.0, "memory": 4.0}, 1: {"gemm": 13.5}})
    assert benchmark_seconds(records, world_size=2) == {"gemm": 13.5}
    old = _records({0: {"gemm": None}, 1: {"gemm": None}})  # rank files before timings
    assert benchmark_seconds(old, world_size=2) == {}


def test_an_end_record_of_an_older_rank_file_still_reads() -> None:
    record = parse_record('{"kind": "end", "rank": 1, "seq": 7, "benchmark": "gemm"}')
    assert isinstance(record, End) and record.seconds is None


def _results(
    run_id: str,
    started: str,
    seconds: dict[str, float],
    *,
    settings: dict[str, object] | None = None,
) -> Results:
    run = RunInfo(
        id=run_id,
        started=started,
        suite="quick",
        world_size=2,
        num_nodes=1,
        backend="gloo",
        command="c",
        benchmark_seconds=seconds,
        config={"benchmarks": settings or {"gemm": {"sizes": [1]}}},
    )
    from clusterbench.schema import Measurement

    m = Measurement(
        benchmark="gemm",
        metric="tflops_best",
        value=1.0,
        unit="TFLOP/s",
        rank=0,
        host="node1",
        device="cpu:0",
    )
    return Results(tool=ToolInfo(version="0"), run=run, measurements=[m])


def test_history_keeps_the_timings_newest_first(tmp_path: Path) -> None:
    with open_history(tmp_path / "h.sqlite") as history:
        history.record(_results("a", "2026-12-01T10:00:00+00:00", {"gemm": 10.0}), tmp_path)
        history.record(_results("b", "2026-12-02T10:00:00+00:00", {"gemm": 12.0}), tmp_path)
        # the newest: a run folder from before timings were kept, imported
        history.record(_results("c", "2026-12-03T10:00:00+00:00", {}), tmp_path)
        found = history.timings(suite="quick", backend="gloo", world_size=2, host="node1")
        assert [(t.run_id, t.benchmark_seconds) for t in found] == [
            ("b", {"gemm": 12.0}),
            ("a", {"gemm": 10.0}),
        ]
        assert found[0].settings == {"gemm": {"sizes": [1]}}
        # other hosts, world sizes, suites and backends are other runs
        assert history.timings(suite="quick", backend="gloo", world_size=2, host="x") == []
        assert history.timings(suite="quick", backend="gloo", world_size=4, host="node1") == []
        assert history.timings(suite="full", backend="gloo", world_size=2, host="node1") == []
        assert history.timings(suite="quick", backend="nccl", world_size=2, host="node1") == []
        limited = history.timings(
            suite="quick", backend="gloo", world_size=2, host="node1", limit=1
        )
        assert [t.run_id for t in limited] == ["b"]


def test_an_older_history_gains_the_column_and_stays_readable(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    with open_history(db) as history:
        history.record(_results("old", "2026-12-01T10:00:00+00:00", {}), tmp_path)
    conn = sqlite3.connect(db)  # as a database written before the column existed
    conn.execute("ALTER TABLE runs DROP COLUMN timings")
    conn.commit()
    conn.close()
    with open_history(db) as history:
        assert history.timings(suite="quick", backend="gloo", world_size=2, host="node1") == []
        assert [r.id for r in history.runs()] == ["old"]
        history.record(_results("new", "2026-12-02T10:00:00+00:00", {"gemm": 9.0}), tmp_path)
        found = history.timings(suite="quick", backend="gloo", world_size=2, host="node1")
        assert [t.run_id for t in found] == ["new"]  # the old run has none
        assert [r.id for r in history.runs()] == ["new", "old"]
        assert history.load("old")[0].run.id == "old"
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT timings FROM runs WHERE id = 'old'").fetchone() == (None,)
    conn.close()


TABLE = TimingTable(
    device_type="cuda",
    gpu="NVIDIA H200",
    world_size=1,
    suite="quick",
    benchmark_seconds={"gemm": 20.0, "memory": 5.0, "collectives": 30.0},
)


def test_history_first_with_the_same_settings_then_the_table_then_none() -> None:
    settings = {"gemm": {"sizes": [1]}, "memory": {"x": 1}, "collectives": {"y": 2}}
    past = [
        # memory ran with other settings
        PastTimings(
            benchmark_seconds={"gemm": 11.0, "memory": 9.0},
            settings={"gemm": {"sizes": [1]}, "memory": {"x": 99}},
        ),
        PastTimings(benchmark_seconds={"gemm": 13.0}, settings={"gemm": {"sizes": (1,)}}),
        PastTimings(benchmark_seconds={"gemm": 100.0}, settings={"gemm": {"sizes": [1]}}),
    ]
    got = expected_seconds(
        settings=settings, past=past, table=TABLE, at_preset={"memory"}, max_runs=2
    )
    assert got == [
        Expected(benchmark="gemm", seconds=12.0, source="history", num_runs=2),  # newest 2
        Expected(benchmark="memory", seconds=5.0, source="table", table="table: 1x NVIDIA H200"),
        Expected(benchmark="collectives", seconds=None, source="none"),  # settings changed
    ]


def test_the_closest_table() -> None:
    def t(gpu: str | None, ws: int, suite: str = "quick", device: str = "cuda") -> TimingTable:
        return dataclasses.replace(TABLE, gpu=gpu, world_size=ws, suite=suite, device_type=device)

    tables = [
        t("NVIDIA H200", 1),
        t("NVIDIA H200", 8),
        t("NVIDIA A100", 4),
        t(None, 2, device="cpu"),
        t("NVIDIA H200", 1, "standard"),
    ]
    pick = pick_table
    assert (
        pick(tables, suite="quick", device_type="cuda", gpu="NVIDIA H200", world_size=4)
        == tables[0]
    )
    assert (
        pick(tables, suite="quick", device_type="cuda", gpu="NVIDIA H200", world_size=6)
        == tables[1]
    )
    assert (
        pick(tables, suite="quick", device_type="cuda", gpu="NVIDIA A100", world_size=1)
        == tables[2]
    )
    assert pick(tables, suite="quick", device_type="cpu", gpu=None, world_size=2) == tables[3]
    assert pick(tables, suite="full", device_type="cuda", gpu="NVIDIA H200", world_size=1) is None


def test_shipped_table_names_only_benchmarks_of_its_suite() -> None:
    tables = timing_tables()
    assert {(t.device_type, t.suite) for t in tables} >= {("cpu", "quick"), ("cpu", "standard")}
    for table in tables:
        suite = set(registry.suite_benchmarks(table.suite))
        assert set(table.benchmark_seconds) <= suite, (table.suite, table.benchmark_seconds)
        assert all(s > 0 for s in table.benchmark_seconds.values())


def _plan(suite: str, sets: tuple[str, ...] = ()) -> RunPlan:
    config = build_run_config(suite=suite, device_type="cpu", sets=sets)
    return run_plan(config, device_type="cpu", world_size=2)


@pytest.mark.parametrize("suite", ["quick", "standard"])
def test_a_cpu_run_at_its_presets_has_a_figure_for_every_benchmark(suite: str) -> None:
    got = expected_times(_plan(suite), past=[])
    assert got and all(e.seconds is not None and e.source == "table" for e in got), got
    assert all(e.table == "table: 2 CPU ranks" for e in got)


def test_changed_settings_have_no_table_figure() -> None:
    got = {e.benchmark: e for e in expected_times(_plan("quick", ("gemm.dtypes=fp32",)), past=[])}
    assert got["gemm"].source == "none" and got["memory"].source == "table"
