"""Faults across simulated nodes (network namespaces, joined through multi-node torchrun).

A rank killed on the second of two nodes: rank 0, on the first node, names it from the
heartbeats in the run's store, and the rank that only waited for it is named as waiting.  A
node that never comes: the command `clusterbench launch --torchrun` prints starts the run with
the nodes that came within the join timeout, and rank 0 stops it at once, naming them."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterbench import load_results
from tests.helpers import cli, wait_for_activity
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
    failure = next((line for line in err0.splitlines() if "run failed" in line), None)
    assert failure is not None, (err0[-3000:], done[1][1][-3000:])
    assert failure.startswith("clusterbench: run failed: rank 1 on host node1 stopped"), err0
    assert "in all_reduce of 1 MiB on group world" in failure
    assert "waiting for it: rank 0 (host node0)" in failure
    results = load_results(out)
    assert results.run.status == "failed"
    assert [(e.rank, e.host) for e in results.errors] == [(1, "node1"), (0, "node0")]
    kept = {(m.rank, m.host) for m in results.measurements if m.benchmark == "memory"}
    assert kept == {(0, "node0"), (1, "node1")}


def _printed_torchrun(cluster: SimulatedCluster, *, nodes: int, port: int, join_s: int,
                      run_args: list[str]) -> list[str]:  # fmt: skip
    """The command `clusterbench launch --torchrun` prints, as argv (torchrun run as this
    Python's module, so that it is the installed torch's)."""
    proc = cli("launch", "--torchrun", "--nodes", str(nodes), "--gpus-per-node", "1",
               "--master-addr", cluster.addresses[0], "--port", str(port), "--name", "cbjoin",
               "--join-timeout", str(join_s), "--", *run_args)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (line,) = [x for x in proc.stdout.splitlines() if x and not x.startswith("#")]
    argv = shlex.split(line)
    assert argv[0] == "torchrun"
    return [sys.executable, "-m", "torch.distributed.run", *argv[1:]]


def test_a_node_that_never_comes_is_named_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "run"
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "eth0", "PYTHONUNBUFFERED": "1",
           "OMP_NUM_THREADS": "1"}  # fmt: skip
    with SimulatedCluster(3, net=72) as cluster:
        argv = _printed_torchrun(cluster, nodes=3, port=29435, join_s=4,
                                 run_args=["--device", "cpu", "--only", "selftest", "--out",
                                           str(out)])  # fmt: skip
        t0 = time.monotonic()
        procs = [cluster.popen(i, argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for i in range(2)]  # node2 never starts  # fmt: skip
        done = [p.communicate(timeout=120) for p in procs]
        elapsed = time.monotonic() - t0
    assert all(p.returncode != 0 for p in procs)  # torchrun fails: its worker exited 3
    ours = [line for line in done[0][1].splitlines() if line.startswith("clusterbench:")]
    assert ours == [
        "clusterbench: run failed: only 2 of 3 nodes joined the run: node0, node1; the other 1 "
        "did not join within the rendezvous' join timeout (start every node within it: "
        f"clusterbench launch --join-timeout); results kept in {out}"
    ], done[0][1][-3000:]
    assert "exitcode  : 3" in done[0][1]  # torchrun's own summary of its worker
    assert not [x for x in done[1][1].splitlines() if x.startswith("clusterbench:")]
    assert elapsed < 60  # the join timeout (4 s) and start-up, not torch's 600 s
    results = load_results(out)
    assert results.run.status == "failed" and results.run.finished is not None
    assert len(results.errors) == 1 and results.errors[0].message.startswith(
        "only 2 of 3 nodes joined the run: node0, node1;"
    )
    assert results.measurements == [] and results.run.unfinished == ["selftest"]
