"""A simulated fleet: eight network-namespace nodes, one CPU rank each, node3's link shaped low
by tc.  The sparse node-pair plan must name node3 in fewer rounds than all pairs, and the drain
list must hold node3 alone, with Slurm's drain command (the ranks carry srun's variables).

Every other link is shaped to one line rate (100 Mbit/s), as a fabric's links are: unshaped,
eight ranks on two cores set the pairs' figures by who got the CPU (healthy pairs 4-14 Gb/s
apart in one run), a spread in which the slow-pair rule rightly sees no outlier.  node3's
link is shaped to 10 Mbit/s.  Kept cheap: one rank per node with srun's variables (no torchrun
agent per node), one all_reduce size of 256 KiB between node pairs, iperf3 for 2 s (two
one-second intervals: the socket test's quarter-second samples count whole 1 MiB sends, which
at 10 Mbit/s are 0 or 1 a sample, a spread that hides the slow link in the noise).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clusterbench import load_results
from tests.multinode.netns import SimulatedCluster, available, run_as_srun_tasks

pytestmark = [
    pytest.mark.dist,
    pytest.mark.skipif(available() is not None, reason=str(available())),
    pytest.mark.skipif(shutil.which("iperf3") is None, reason="needs iperf3"),
]

NUM_NODES = 8
SLOW = 3  # node3's link is shaped
LINE_RATE, SLOW_RATE = "100mbit", "10mbit"
ARGS = [
    "--only", "collectives,network", "--no-history",
    "--set", "collectives.ops=all_reduce", "--set", "collectives.groups=node_pairs",
    "--set", "collectives.node_pairs=sparse", "--set", "network.node_pairs=sparse",
    "--set", "collectives.min_bytes=262144", "--set", "collectives.max_bytes=262144",
    "--set", "collectives.modes=back_to_back,blocking", "--set", "collectives.iters=5",
    "--set", "collectives.warmup=1",
    "--set", "network.tool=iperf3", "--set", "network.duration_s=2",
    "--set", "network.streams=2", "--set", "network.latency_round_trips=20",
]  # fmt: skip


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = Path(tmp_path_factory.mktemp("fleet")) / "run"
    with SimulatedCluster(NUM_NODES, net=86) as cluster:
        for node in range(NUM_NODES):
            if node == SLOW:  # a deep queue: a steady low rate, as a link trained low has
                cluster.shape(node, rate=SLOW_RATE, latency="400ms")
            else:
                cluster.shape(node, rate=LINE_RATE)
        procs = run_as_srun_tasks(cluster, args=[*ARGS, "--out", str(out)], port=29441,
                                   timeout=420)  # fmt: skip
    for p in procs:
        assert p.returncode in (0, 1), p.stderr[-3000:]
    (out / "console.txt").write_text(procs[0].stdout)  # rank 0 prints the summary
    return out, procs[0].stdout


def test_sparse_plan_takes_fewer_rounds_than_all_pairs(fleet: tuple[Path, str]) -> None:
    results = load_results(fleet[0])
    assert results.run.status == "completed" and results.run.num_nodes == NUM_NODES
    plans = {f.id: f.evidence for f in results.findings if f.id.endswith(".node_pair_plan")}
    assert set(plans) == {"collectives.node_pair_plan", "network.node_pair_plan"}
    for plan in plans.values():
        assert plan["strategy"] == "sparse" and plan["launcher"] == "slurm"
        assert f"node{SLOW}" in plan["suspects"]
        assert plan["rounds"] == plan["survey_rounds"] + plan["retest_rounds"]
        assert plan["rounds"] < plan["all_pairs_rounds"], plan
    assert plans["collectives.node_pair_plan"]["all_pairs_rounds"] == NUM_NODES - 1
    assert plans["network.node_pair_plan"]["all_pairs_rounds"] == 2 * (NUM_NODES - 1)
    # the pairs measured are the plan's (a slow survey pair may be measured again): each node
    # met 3 partners in the survey, not 7
    pairs = {
        m.params["hosts"]
        for m in results.measurements
        if m.metric == "busbw" and m.params.get("group_kind") == "node_pairs"
    }
    planned = plans["collectives.node_pair_plan"]
    assert pairs == {
        ",".join(sorted(p)) for p in [*planned["survey_pairs"], *planned["retest_pairs"]]
    }
    assert len(planned["survey_pairs"]) == 3 * NUM_NODES // 2
    assert len(pairs) < NUM_NODES * (NUM_NODES - 1) // 2


def test_drain_list_holds_the_shaped_node_alone(fleet: tuple[Path, str]) -> None:
    out, console = fleet
    drain = json.loads((out / "drain.json").read_text())
    assert [(e["kind"], e["nodes"]) for e in drain["entries"]] == [("node", [f"node{SLOW}"])]
    [entry] = drain["entries"]
    measured = {e["measured"] for e in entry["evidence"]}
    assert measured == {"all_reduce busbw", "TCP throughput (iperf3)"}
    for e in entry["evidence"]:
        assert e["slow_partners"] >= 2 and e["retests"], e  # confirmed by re-tests
    [command] = entry["commands"]
    assert command.startswith(f'scontrol update nodename=node{SLOW} state=drain reason="')
    assert f"node{SLOW}" not in drain["hostfile"] and len(drain["hostfile"]) == NUM_NODES - 1
    summary = (out / "summary.md").read_text()
    assert "## Drain list" in summary and command in summary
    assert "Drain list: 1 node to drain (launcher slurm" in console
    assert command in console
