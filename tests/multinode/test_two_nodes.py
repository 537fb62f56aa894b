"""A run across simulated nodes (network namespaces), joined through multi-node torchrun."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusterbench import load_results
from clusterbench.analyses.placement.facts import placements
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
            args=["--only", "doctor,selftest,memory", "--set", "memory.size_bytes=8388608",
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
    # each node recorded its rank's placement; torchrun numbers them node by node: no warning
    placed = [(p.rank, p.host, p.node, p.local_rank) for p in placements(results)]
    assert placed == [(0, "node0", 0, 0), (1, "node1", 1, 0)]
    launchers = {f.evidence["launcher"] for f in results.findings if f.id == "doctor.placement"}
    assert launchers == {"torchrun"}
    verdicts = {f.id: f for f in results.findings if f.id.startswith("placement.")}
    assert list(verdicts) == ["placement.layout"]
    assert verdicts["placement.layout"].evidence["ranks_by_node"] == {"0": "0", "1": "1"}


def test_ranks_interleaved_across_nodes_are_found(tmp_path: Path) -> None:
    """srun --distribution=cyclic's numbering (rank r on node r % 2), given to each task as srun
    would: the order and training's tp group of ranks 0-1 are flagged, with srun's flag."""
    out = tmp_path / "run"
    drop = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    base = {k: v for k, v in os.environ.items() if k not in drop}
    with SimulatedCluster(2, net=75) as cluster:
        base |= {"GLOO_SOCKET_IFNAME": "eth0", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1",
                 "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
                 "SLURM_JOB_ID": "4417",
                 "SLURM_LAUNCH_NODE_IPADDR": cluster.addresses[0]}  # fmt: skip
        args = [sys.executable, "-m", "clusterbench", "run", "--device", "cpu", "--only",
                "doctor,training", "--set", "training.strategy=tp", "--set",
                "training.world_sizes=2", "--set", "training.steps=1", "--set",
                "training.warmup_steps=0", "--out", str(out)]  # fmt: skip
        procs = [
            cluster.popen(rank % 2, args, env={**base, "SLURM_PROCID": str(rank),
                                               "SLURM_LOCALID": str(rank // 2)},
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for rank in range(4)
        ]  # fmt: skip
        errs = [p.communicate(timeout=240)[1] for p in procs]
    for p, err in zip(procs, errs, strict=True):
        assert p.returncode in (0, 1), err[-2000:]
    results = load_results(out)
    assert results.run.status == "completed" and results.run.num_nodes == 2
    placed = [(p.rank, p.host, p.local_rank) for p in placements(results)]
    assert placed == [(0, "node0", 0), (1, "node1", 0), (2, "node0", 1), (3, "node1", 1)]
    verdicts = {f.id: f for f in results.findings if f.id.startswith("placement.")}
    order = verdicts["placement.rank_order"]
    assert order.severity == "warn"
    assert order.evidence["ranks_by_host"] == {"node0": "0,2", "node1": "1,3"}
    assert order.fix.startswith("srun --distribution=block")
    [group] = verdicts["placement.tp_group"].evidence["groups"]
    assert group == {"size": 2, "ranks": "0-1", "nodes": [0, 1], "min_nodes": 1}


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
