"""Healthy simulated nodes, nothing shaped, run again and again: the verdicts that compare nodes
and devices (slow node pairs, peer outliers) must never warn or fail on them.

All nodes share this machine's few cores, so their measurements differ by 30% and more from
run to run and from repeat to repeat: exactly the noise a fail must be beyond.  Two runs each
of three and four nodes (five each until CI had to fit in 15 minutes; none of those failed in
the sessions since the memory copies were lengthened); before the verdicts judged against the
repeats' spread, 9 of 11 such runs failed with nothing wrong.

Kept cheap, as CI runs four of them: every process is one rank with the variables srun sets
(no torchrun agent per node importing torch as well: half the start-up), and the TCP test is
clusterbench's socket test for 1 s (four 0.25 s samples a pair, where iperf3 needs 2 s for two
one-second intervals).  The verdicts judged are the same; iperf3 between nodes is exercised by
test_slow_node.py.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from clusterbench import load_results
from tests.multinode.netns import SimulatedCluster, available, run_as_srun_tasks

pytestmark = [
    pytest.mark.dist,
    pytest.mark.skipif(available() is not None, reason=str(available())),
]

REPEATS = 2
# Every collective at one size between node pairs, timed back to back and blocking (whose
# repeats give the spread); TCP for 1 s, sampled every 0.25 s.  Memory copies 40 times (5 in
# the CPU preset: 15 ms, one or two of the scheduler's time slices, in which the one of three
# nodes that shares a core with another is slow in every repeat; in 130 ms the load balancer
# evens the three out).
ARGS = [
    "--only", "collectives,memory,network",
    "--set", "collectives.groups=node_pairs",
    "--set", "collectives.min_bytes=1048576", "--set", "collectives.max_bytes=1048576",
    "--set", "collectives.modes=back_to_back,blocking",
    "--set", "memory.size_bytes=33554432", "--set", "memory.repeats=40",
    "--set", "network.tool=socket", "--set", "network.duration_s=1",
    "--set", "network.streams=2", "--set", "network.latency_round_trips=50",
]  # fmt: skip
JUDGED = ("collectives.slow_node_pair", "network.slow_node_pair")


@pytest.mark.parametrize("repeat", range(REPEATS))
@pytest.mark.parametrize("num_nodes", [3, 4])
def test_healthy_nodes_give_no_noise_alarm(num_nodes: int, repeat: int, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with SimulatedCluster(num_nodes, net=83) as cluster:
        procs = run_as_srun_tasks(cluster, args=[*ARGS, "--out", str(out)], port=29431,
                                   timeout=240)  # fmt: skip
    for p in procs:
        assert p.returncode in (0, 1), p.stderr[-3000:]
    results = load_results(out)
    assert results.run.status == "completed"
    nodes = [f"node{i}" for i in range(num_nodes)]
    # the verdicts had every pair and every device to judge, with the repeats' spread
    pairs = {
        (m.params["op"], m.params["hosts"])
        for m in results.measurements
        if m.metric == "busbw" and m.params.get("mode") == "blocking" and m.stats
        and m.stats.samples > 1
    }  # fmt: skip
    assert len(pairs) == 6 * num_nodes * (num_nodes - 1) // 2, sorted(pairs)
    tcp = {
        (m.params["src_host"], m.params["dst_host"])
        for m in results.measurements
        if m.metric == "tcp_throughput" and m.stats and m.stats.samples > 1
    }
    assert tcp == set(itertools.permutations(nodes, 2))
    memory = {m.host for m in results.measurements if m.benchmark == "memory" and m.stats}
    assert memory == set(nodes)
    alarms = [
        (f.id, f.severity, f.message)
        for f in results.findings
        if (f.id in JUDGED or f.id.startswith("outlier.")) and f.severity in ("warn", "fail")
    ]
    assert alarms == []
    # and the drain list says so: nothing to take out of service
    drain = json.loads((out / "drain.json").read_text())
    assert drain["empty"] is True and drain["entries"] == [], drain["entries"]
    assert sorted(drain["hosts"]) == nodes
