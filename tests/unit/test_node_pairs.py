"""Node-pair scoring: the slow node among directed and undirected pairs, and its findings."""

from __future__ import annotations

import itertools
import random

import pytest

from clusterbench.benchmarks.collectives.findings import findings as collectives_findings
from clusterbench.benchmarks.collectives.findings import node_pair_findings
from clusterbench.benchmarks.network.findings import findings, slow_node_pair_findings
from clusterbench.config import Thresholds
from clusterbench.judging.node_pairs import (
    format_pair_value,
    slow_node_pairs,
    slow_pair_finding,
)
from clusterbench.schema import Measurement, ParamValue, Results, RunInfo, Stats, ToolInfo

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


# --- judged against the noise of the repeats ----------------------------------------------------


def _busbw(a: str, b: str, value: float, *, mode: str, cv: float | None = None) -> Measurement:
    """A node pair's broadcast busbw at 1 MiB; ``cv`` gives it 10 repeats of that spread."""
    stats = None
    if cv is not None:
        stats = Stats(samples=10, median=value, min=value * max(0.05, 1 - 2 * cv),
                      max=value * (1 + 2 * cv), mean=value, cv=cv)  # fmt: skip
    params: dict[str, ParamValue] = {
        "op": "broadcast", "size_bytes": 2**20, "group": f"{a}-{b}", "group_kind": "node_pairs",
        "group_size": 2, "hosts": f"{a},{b}", "mode": mode, "dtype": "fp32",
    }  # fmt: skip
    return Measurement(benchmark="collectives", metric="busbw", value=value, unit="GB/s",
                       params=params, rank=0, host=a, device="cpu:0", stats=stats)  # fmt: skip


# Broadcast busbw of an unshaped 4-node run on one 2-core machine (tests/multinode, the issue's
# false alarm): back-to-back is one timing (no stats), the blocking repeats of the same pair,
# op and size vary by 27-45%.  node2's pairs ran while the scheduler favoured others.
NOISY_4 = {
    ("node0", "node3"): (1.408, 0.312),
    ("node0", "node2"): (0.363, 0.393),
    ("node0", "node1"): (1.126, 0.450),
    ("node1", "node2"): (0.510, 0.365),
    ("node1", "node3"): (1.152, 0.267),
    ("node2", "node3"): (0.564, 0.288),
}
# The issue's numbers: pairs at 0.75-1.2 GB/s against a 1.3 GB/s median, repeats varying 10-30%.
ISSUE_4 = {
    ("node0", "node1"): (1.30, 0.10),
    ("node0", "node2"): (1.35, 0.15),
    ("node0", "node3"): (1.32, 0.20),
    ("node1", "node2"): (0.75, 0.30),
    ("node1", "node3"): (1.20, 0.25),
    ("node2", "node3"): (0.80, 0.20),
}


def _pair_runs(data: dict[tuple[str, str], tuple[float, float]], *, stats: bool) -> Results:
    ms = []
    for (a, b), (value, cv) in data.items():
        ms.append(_busbw(a, b, value, mode="back_to_back"))
        if stats:
            ms.append(_busbw(a, b, value * 0.95, mode="blocking", cv=cv))
    return _results(ms, 4)


@pytest.mark.parametrize("data", [NOISY_4, ISSUE_4], ids=["measured", "issue"])
def test_noisy_healthy_pairs_are_judged_against_their_repeats(
    data: dict[tuple[str, str], tuple[float, float]],
) -> None:
    assert node_pair_findings(_pair_runs(data, stats=True), mads=3.0, min_rel=0.05) == []
    assert collectives_findings(_pair_runs(data, stats=True), Thresholds()) == []
    # the same values without the repeats' spread: only the MAD judges, and it cries wolf
    blind = node_pair_findings(_pair_runs(data, stats=False), mads=3.0, min_rel=0.05)
    assert [f.id for f in blind] == ["collectives.slow_node_pair"]


def test_a_shaped_node_among_noisy_pairs_fails_and_only_its_pairs_are_listed() -> None:
    # node2's link shaped to 40 Mbit/s (0.005 GB/s); its blocking repeats as erratic as can be
    shaped = {
        p: (0.005, 0.9) if "node2" in p else (value, cv) for p, (value, cv) in NOISY_4.items()
    }
    found = node_pair_findings(_pair_runs(shaped, stats=True), mads=3.0, min_rel=0.05)
    assert [(f.id, f.severity, f.scope) for f in found] == [
        ("collectives.slow_node_pair", "fail", "host:node2")
    ]
    assert set(found[0].evidence["slow_pairs"]) == {"node0-node2", "node1-node2", "node2-node3"}
    assert "beyond the noise" in found[0].message
    # the pooled CV of the healthy pairs (0.312, 0.450, 0.267): sqrt(mean cv^2)
    assert found[0].evidence["healthy_cv"] == pytest.approx(0.3517, abs=1e-4)
    assert "the healthy pairs' repeats vary by 35%" in found[0].message
    # the setting is applied: 10 spreads of the erratic shaped pairs (x3200) swallow even 1/230
    lax = Thresholds(outlier_spread_sigmas=10.0)
    assert collectives_findings(_pair_runs(shaped, stats=True), lax) == []


def test_a_pair_of_the_slow_node_that_measured_healthy_is_not_listed() -> None:
    # The issue: "mnode0->mnode2 13.4 Gb/s" listed beside the shaped 0.144 Gb/s pairs.  No
    # repeats (one-second iperf3 tests): the pair is out only nearer the slow node's level.
    nodes = ["mnode0", "mnode1", "mnode2", "mnode3"]
    rng = random.Random(3)
    value = {
        (a, b): 0.144 * rng.uniform(0.9, 1.1)
        if "mnode2" in (a, b)
        else 15 * rng.uniform(0.97, 1.03)
        for a, b in itertools.permutations(nodes, 2)
    }
    value[("mnode0", "mnode2")] = 13.4
    found = slow_node_pair_findings(_results(_directed(nodes, value), 4), mads=3.0, min_rel=0.05)
    assert [(f.severity, f.scope) for f in found] == [("fail", "host:mnode2")]
    listed = set(found[0].evidence["slow_pairs"])
    assert "mnode0->mnode2" not in listed and "13.4" not in found[0].message
    assert listed == {"->".join(p) for p in itertools.permutations(nodes, 2) if "mnode2" in p} - {
        "mnode0->mnode2"
    }


def test_tcp_intervals_are_the_spread_of_a_pair() -> None:
    nodes = [f"node{i}" for i in range(3)]
    # node2's outgoing TCP at 60-70% of the others: beyond 5%, inside intervals varying by 25%
    value = {(a, b): 9.0 if a == "node2" else 14.0 for a, b in itertools.permutations(nodes, 2)}
    ms = _directed(nodes, value)
    assert [f.scope for f in slow_node_pair_findings(_results(ms, 3), mads=3.0, min_rel=0.05)] == [
        "host:node2"
    ]
    noisy = [
        m.model_copy(update={"stats": Stats(samples=4, median=m.value, min=m.value * 0.6,
                                            max=m.value * 1.3, mean=m.value, cv=0.25)})
        for m in ms
    ]  # fmt: skip
    assert slow_node_pair_findings(_results(noisy, 3), mads=3.0, min_rel=0.05) == []
    steady = [m.model_copy(update={"stats": Stats(samples=4, median=m.value, min=m.value * 0.99,
                                                   max=m.value * 1.01, mean=m.value, cv=0.01)})
              for m in ms]  # fmt: skip
    found = slow_node_pair_findings(_results(steady, 3), mads=3.0, min_rel=0.05)
    assert [f.scope for f in found] == ["host:node2"]
    assert set(found[0].evidence["slow_pairs"]) == {"node2->node0", "node2->node1"}
    assert found[0].evidence["slow_pairs_cv"] == {"node2->node0": 0.01, "node2->node1": 0.01}
