"""Three simulated nodes, one with its link shaped low by tc: the node-pair tests must name it."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench import load_results
from tests.multinode.netns import SimulatedCluster, available
from tests.multinode.test_two_nodes import run_on_nodes

pytestmark = [
    pytest.mark.dist,
    pytest.mark.skipif(available() is not None, reason=str(available())),
]

SLOW = 2  # node2's link is shaped
ARGS = [
    "--only", "collectives,network",
    "--set", "collectives.ops=all_reduce", "--set", "collectives.groups=world,node_pairs",
    "--set", "collectives.min_bytes=1048576", "--set", "collectives.max_bytes=1048576",
    "--set", "collectives.modes=back_to_back,blocking", "--set", "collectives.iters=3",
    "--set", "collectives.warmup=1",
    "--set", "network.duration_s=2", "--set", "network.streams=2",
    "--set", "network.latency_round_trips=50",
]  # fmt: skip


@pytest.fixture(scope="module")
def slow_node_results(tmp_path_factory: pytest.TempPathFactory) -> object:
    out = Path(tmp_path_factory.mktemp("slow")) / "run"
    with SimulatedCluster(3, net=78) as cluster:
        cluster.shape(SLOW, rate="40mbit")
        procs = run_on_nodes(cluster, args=[*ARGS, "--out", str(out)], port=29412, timeout=300)
    for p in procs:
        assert p.returncode in (0, 1), p.stderr[-3000:]
    return load_results(out)


def test_node_pair_busbw_matrix_shows_the_slow_node(slow_node_results: object) -> None:
    results = slow_node_results
    pairs = {
        tuple(sorted(str(m.params["hosts"]).split(","))): m.value
        for m in results.measurements  # type: ignore[attr-defined]
        if m.benchmark == "collectives" and m.metric == "busbw"
        and m.params.get("group_kind") == "node_pairs"
    }  # fmt: skip
    assert len(pairs) == 3, pairs
    fast = pairs[("node0", "node1")]
    for pair, busbw in pairs.items():
        if "node2" in pair:
            assert busbw < 0.5 * fast, pairs


def test_findings_name_the_slow_node(slow_node_results: object) -> None:
    results = slow_node_results
    slow = [f for f in results.findings if f.id == "collectives.slow_node_pair"]  # type: ignore[attr-defined]
    assert slow and all(f.severity == "fail" for f in slow)
    assert "node2" in slow[0].message and "node0" not in slow[0].scope
    # judged against the repeats' spread (blocking timings), listing only the pairs that are out
    assert slow[0].evidence["healthy_cv"] is not None
    assert set(slow[0].evidence["slow_pairs"]) == {"node0-node2", "node1-node2"}
    tcp = {
        (m.params["src_host"], m.params["dst_host"]): m.value
        for m in results.measurements  # type: ignore[attr-defined]
        if m.metric == "tcp_throughput"
    }
    assert tcp[("node0", "node1")] > 3 * tcp[("node0", "node2")]
    assert tcp[("node0", "node1")] > 3 * tcp[("node2", "node1")]
    net = [f for f in results.findings if f.id == "network.slow_node_pair"]  # type: ignore[attr-defined]
    assert [(f.severity, f.scope) for f in net] == [("fail", "host:node2")], net
    assert "0.0 Gb/s" not in net[0].message
    assert net[0].evidence["healthy_cv"] is not None  # iperf3's intervals
    shaped = {"node0->node2", "node1->node2", "node2->node0", "node2->node1"}
    assert set(net[0].evidence["slow_pairs"]) == shaped, net[0].evidence


def test_the_slow_pairs_were_measured_again_and_stayed_slow(slow_node_results: object) -> None:
    """All pairs measure their slow pairs once more (a burst of load is not a slow link): the
    shaped node's two pairs, each in a round of its own, and the verdict above still names it."""
    results = slow_node_results
    plans = {f.id: f.evidence for f in results.findings if f.id.endswith(".node_pair_plan")}  # type: ignore[attr-defined]
    for bench in ("collectives", "network"):  # the network test runs each pair both ways
        plan = plans[f"{bench}.node_pair_plan"]
        assert plan["strategy"] == "all"
        assert sorted(plan["retest_pairs"]) == [["node0", "node2"], ["node1", "node2"]], plan
        ways = 2 if bench == "network" else 1
        assert plan["retest_rounds"] == 2 * ways, plan
        assert plan["rounds"] == plan["survey_rounds"] + plan["retest_rounds"]
    # each of the shaped node's pairs has two back-to-back figures now, both slow
    twice = [
        m.value
        for m in results.measurements  # type: ignore[attr-defined]
        if m.benchmark == "collectives" and m.metric == "busbw"
        and m.params.get("group_kind") == "node_pairs" and m.params.get("mode") == "back_to_back"
        and "node2" in str(m.params["hosts"])
    ]  # fmt: skip
    assert len(twice) == 4, twice
