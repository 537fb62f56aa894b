"""Node-pair scoring: the slow node among directed and undirected pairs, and its findings."""

from __future__ import annotations

import itertools
import random

import pytest

from clusterbench.analysis.network import findings, slow_node_pair_findings
from clusterbench.analysis.node_pairs import (
    format_pair_value,
    slow_node_pairs,
    slow_pair_finding,
)
from clusterbench.config import Thresholds
from clusterbench.schema import Measurement, ParamValue, Results, RunInfo, ToolInfo

FAST_GBPS = 9.4
SLOW_GBPS = 0.038  # a 40 Mbit/s link


def _tcp(src: str, dst: str, value: float, **extra: ParamValue) -> Measurement:
    params: dict[str, ParamValue] = {
        "src_host": src,
        "dst_host": dst,
        "loopback": src == dst,
        "streams": 2,
        "tool": "iperf3",
        **extra,
    }
    return Measurement(
        benchmark="network",
        metric="tcp_throughput",
        value=value,
        unit="Gb/s",
        params=params,
        rank=0,
        host=src,
        device="cpu:0",
    )


def _results(measurements: list[Measurement], num_nodes: int) -> Results:
    run = RunInfo(
        id="r",
        started="2026-11-01T00:00:00Z",
        suite="quick",
        world_size=num_nodes,
        num_nodes=num_nodes,
        backend="gloo",
        command="clusterbench run",
    )
    return Results(tool=ToolInfo(version="0.1.0"), run=run, measurements=measurements)


def _directed(nodes: list[str], value: dict[tuple[str, str], float]) -> list[Measurement]:
    return [_tcp(a, b, value[(a, b)]) for a, b in itertools.permutations(nodes, 2)]


@pytest.mark.parametrize("num_nodes", [3, 4, 5])
def test_slow_node_both_directions_is_named(num_nodes: int) -> None:
    nodes = [f"node{i}" for i in range(num_nodes)]
    bad = nodes[2]
    value = {
        (a, b): SLOW_GBPS if bad in (a, b) else FAST_GBPS
        for a, b in itertools.permutations(nodes, 2)
    }
    ms = [*_directed(nodes, value), _tcp("node0", "node0", 30.0)]  # loopback: left out
    found = slow_node_pair_findings(_results(ms, num_nodes), mads=3.0, min_rel=0.05)
    assert [(f.id, f.severity, f.scope) for f in found] == [
        ("network.slow_node_pair", "fail", f"host:{bad}")
    ]
    assert len(found[0].evidence["slow_pairs"]) == 2 * (num_nodes - 1)
    assert f"node0->{bad} 0.038 Gb/s" in found[0].message
    assert "below the 9.4 Gb/s of the healthy pairs" in found[0].message
    assert "ethtool -S" in (found[0].fix or "") and "ip -s link" in (found[0].fix or "")


def test_slow_in_one_direction_only_is_named() -> None:
    nodes = ["a", "b", "c"]
    value = {
        (s, d): SLOW_GBPS if s == "c" else FAST_GBPS for s, d in itertools.permutations(nodes, 2)
    }
    found = slow_node_pairs(value, mads=3.0, min_rel=0.05)
    assert found is not None and found.common_nodes == ["c"]
    assert set(found.slow) == {("c", "a"), ("c", "b")}


def test_healthy_nodes_with_jitter_give_nothing() -> None:
    rng = random.Random(7)
    nodes = [f"node{i}" for i in range(4)]
    for _ in range(20):
        value = {p: FAST_GBPS * rng.uniform(0.98, 1.02) for p in itertools.permutations(nodes, 2)}
        ms = _directed(nodes, value)
        assert slow_node_pair_findings(_results(ms, 4), mads=3.0, min_rel=0.05) == []


def test_two_nodes_give_nothing() -> None:
    ms = [_tcp("a", "b", SLOW_GBPS), _tcp("b", "a", FAST_GBPS)]
    assert findings(_results(ms, 2), Thresholds()) == []
    assert slow_node_pairs({("a", "b"): 0.01, ("b", "a"): 10.0}, mads=3.0, min_rel=0.05) is None


def test_tools_are_not_mixed_and_rdma_is_scored() -> None:
    nodes = ["a", "b", "c"]
    # c only has the (slower) socket test: no verdict from comparing tools
    ms = [
        _tcp(s, d, 2.0, tool="socket") if "c" in (s, d) else _tcp(s, d, FAST_GBPS)
        for s, d in itertools.permutations(nodes, 2)
    ]
    assert slow_node_pair_findings(_results(ms, 3), mads=3.0, min_rel=0.05) == []
    rdma = [
        _tcp(s, d, 20.0 if "b" in (s, d) else 390.0).model_copy(update={"metric": "rdma_write_bw"})
        for s, d in itertools.permutations(nodes, 2)
    ]
    found = slow_node_pair_findings(_results(rdma, 3), mads=3.0, min_rel=0.05)
    assert [f.scope for f in found] == ["host:b"] and "RDMA write" in found[0].message


def test_undirected_finding_formats_small_values_with_three_digits() -> None:
    value = {("n0", "n1"): 11.2, ("n0", "n2"): 0.00466, ("n1", "n2"): 0.0047}
    found = slow_node_pairs(value, mads=3.0, min_rel=0.05)
    assert found is not None and found.common_nodes == ["n2"] and found.baseline == 11.2
    finding = slow_pair_finding(
        found, finding_id="x.slow", measured="all_reduce busbw", unit="GB/s", fix="f",
        directed=False,
    )  # fmt: skip
    assert "n0-n2 0.00466 GB/s, n1-n2 0.0047 GB/s" in finding.message
    assert "0.0 GB/s" not in finding.message and finding.scope == "host:n2"
    assert format_pair_value(0.0) == "0" and format_pair_value(45.26) == "45.3"
