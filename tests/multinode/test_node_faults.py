"""A rank killed on the second of two simulated nodes (network namespaces, joined through
multi-node torchrun): rank 0, on the first node, names it from the heartbeats in the run's
store, and the rank that only waited for it is named as waiting."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from clusterbench import load_results
from tests.helpers import wait_for_activity
from tests.multinode.netns import SimulatedCluster, available
from tests.multinode.test_two_nodes import _torchrun

pytestmark = [
    pytest.mark.dist,
    pytest.mark.skipif(available() is not None, reason=str(available())),
]

ARGS = [
    "--only", "memory,collectives", "--set", "memory.size_bytes=8388608", "--timeout", "60",
    "--set", "collectives.ops=all_reduce", "--set", "collectives.modes=back_to_back",
    "--set", "collectives.groups=world", "--set", "collectives.min_bytes=1048576",
    "--set", "collectives.max_bytes=1048576", "--set", "collectives.iters=100000",
]  # fmt: skip


def test_a_rank_killed_on_the_second_node_is_named(tmp_path: Path) -> None:
    out = tmp_path / "run"
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "eth0", "PYTHONUNBUFFERED": "1",
           "OMP_NUM_THREADS": "1"}  # fmt: skip
    with SimulatedCluster(2, net=74) as cluster:
        procs = [
            cluster.popen(i, _torchrun(cluster, nnodes=2, port=29417, args=[*ARGS, "--out",
                          str(out)]), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for i in range(2)
        ]  # fmt: skip
        state = wait_for_activity(out, 1, "in all_reduce")
        os.kill(int(state["pid"]), signal.SIGKILL)
        done = [p.communicate(timeout=180) for p in procs]
    err0 = done[0][1]
    assert procs[0].returncode != 0
    failure = next(line for line in err0.splitlines() if "run failed" in line)
    assert failure.startswith("clusterbench: run failed: rank 1 on host node1 stopped"), err0
    assert "in all_reduce of 1 MiB on group world" in failure
    assert "waiting for it: rank 0 (host node0)" in failure
    results = load_results(out)
    assert results.run.status == "failed"
    assert [(e.rank, e.host) for e in results.errors] == [(1, "node1"), (0, "node0")]
    kept = {(m.rank, m.host) for m in results.measurements if m.benchmark == "memory"}
    assert kept == {(0, "node0"), (1, "node1")}
