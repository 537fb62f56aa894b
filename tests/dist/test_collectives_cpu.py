"""The collectives benchmark through the real launcher with gloo workers on CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.collective_facts import OPS, bus_factor
from clusterbench.schema import Results
from tests.helpers import cpu_run

pytestmark = pytest.mark.dist


def run_collectives(out: Path, nproc: int, *sets: str) -> Results:
    return cpu_run(out, "collectives", sets, nproc=nproc)


def check_results(results: Results, *, n: int, modes: set[str]) -> None:
    ms = [m for m in results.measurements if m.benchmark == "collectives"]
    assert {m.params["op"] for m in ms} == set(OPS)
    assert {m.rank for m in ms} == {0}  # group rank 0 of the world records
    for m in ms:
        assert m.params["group"] == "world" and m.params["group_size"] == n
    timed = [m for m in ms if m.metric != "num_wrong"]
    assert {m.params["mode"] for m in timed} == modes
    by_key: dict[tuple[object, ...], dict[str, float]] = {}
    for m in timed:
        assert {"op", "size_bytes", "group", "mode", "dtype"} <= set(m.params)
        key = (m.params["op"], m.params["size_bytes"], m.params["mode"])
        by_key.setdefault(key, {})[m.metric] = m.value
    for (op, _, _), metrics in by_key.items():
        assert {"algbw", "busbw", "latency_us", "latency_max_us"} <= set(metrics)
        assert metrics["busbw"] == pytest.approx(metrics["algbw"] * bus_factor(str(op), n))
        assert metrics["latency_max_us"] >= metrics["latency_us"] > 0
    wrong = [m for m in ms if m.metric == "num_wrong"]
    assert len(wrong) == len(OPS) and all(m.value == 0 for m in wrong)


def test_four_ranks_all_six_collectives(tmp_path: Path) -> None:
    results = run_collectives(
        tmp_path / "run4", 4, "collectives.max_bytes=1048576", "collectives.iters=5"
    )
    check_results(results, n=4, modes={"back_to_back", "blocking"})
    gather = [m for m in results.measurements if m.params["op"] == "all_gather"]
    sizes = {m.params["size_bytes"] for m in gather if m.metric == "busbw"}
    assert min(sizes) == 16  # 8 B rounds up to one fp32 element per rank
    assert all(isinstance(s, int) and s % (4 * 4) == 0 for s in sizes)  # whole chunks


def test_two_ranks_quick_preset(tmp_path: Path) -> None:
    results = run_collectives(tmp_path / "run2", 2)
    check_results(results, n=2, modes={"back_to_back", "blocking"})
    p99 = [m for m in results.measurements if m.metric == "latency_p99_us"]
    assert p99 and all(m.params["mode"] == "blocking" for m in p99)
    assert (tmp_path / "run2" / "summary.md").read_text().count("busbw GB/s by size") == 1
