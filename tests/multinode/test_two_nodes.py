"""A run across simulated nodes (network namespaces), joined through multi-node torchrun."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusterbench import load_results
from tests.multinode.netns import SimulatedCluster, available

pytestmark = [
    pytest.mark.dist,
    pytest.mark.skipif(available() is not None, reason=str(available())),
]


def _torchrun(cluster: SimulatedCluster, *, nnodes: int, port: int, args: list[str]) -> list[str]:
    return [
        sys.executable, "-m", "torch.distributed.run",
        "--nnodes", str(nnodes), "--nproc-per-node", "1",
        "--rdzv-backend", "c10d", "--rdzv-endpoint", f"{cluster.addresses[0]}:{port}",
        "--rdzv-id", "cbtest", "--max-restarts", "0",
        "-m", "clusterbench", "run", "--device", "cpu", *args,
    ]  # fmt: skip


def run_on_nodes(
    cluster: SimulatedCluster, *, args: list[str], port: int = 29411, timeout: float = 240
) -> list[subprocess.CompletedProcess[str]]:
    """Start clusterbench on every simulated node through torchrun; wait for all."""
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "eth0", "PYTHONUNBUFFERED": "1",
           "OMP_NUM_THREADS": "1"}  # fmt: skip
    n = len(cluster.nodes)
    procs = [
        cluster.popen(
            i,
            _torchrun(cluster, nnodes=n, port=port, args=args),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(n)
    ]
    done = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return done


def test_two_simulated_nodes_join_one_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with SimulatedCluster(2) as cluster:
        procs = run_on_nodes(
            cluster,
            args=["--only", "selftest,memory", "--set", "memory.size_bytes=8388608",
                  "--out", str(out)],
        )  # fmt: skip
    for p in procs:
        assert p.returncode in (0, 1), p.stderr[-2000:]
    results = load_results(out)
    assert results.run.status == "completed"
    assert results.run.world_size == 2
    assert results.run.num_nodes == 2
    assert sorted(h.hostname for h in results.hosts) == ["node0", "node1"]
    hosts = {(m.rank, m.host) for m in results.measurements if m.benchmark == "memory"}
    assert hosts == {(0, "node0"), (1, "node1")}


def test_a_failing_rank_on_another_node_is_named_and_results_kept(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with SimulatedCluster(2, net=76) as cluster:
        procs = run_on_nodes(
            cluster,
            port=29414,
            args=["--only", "memory,selftest", "--set", "memory.size_bytes=8388608",
                  "--set", "selftest.fail_rank=1", "--out", str(out)],
        )  # fmt: skip
    assert all(p.returncode != 0 for p in procs)
    assert "rank 1 on host node1 failed in selftest" in procs[1].stderr
    assert "run failed: rank 1 on host node1" in procs[0].stderr
    results = load_results(out)
    assert results.run.status == "failed"
    assert results.run.unfinished == ["selftest"]
    assert results.errors[0].rank == 1 and results.errors[0].host == "node1"
    kept = {(m.rank, m.host) for m in results.measurements if m.benchmark == "memory"}
    assert kept == {(0, "node0"), (1, "node1")}
