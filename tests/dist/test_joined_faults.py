"""Faults in a run that a launcher started (here: two tasks with the variables srun sets, so no
clusterbench parent watches them): ranks that disagree stop at once, and a killed rank is named
by rank 0 from the heartbeats in the run's store."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterbench import load_results
from tests.helpers import wait_for_activity

pytestmark = pytest.mark.dist

HOST = socket.gethostname()
BASE = ["--device", "cpu", "--set", "gemm.shapes=64x64x64", "--set", "gemm.dtypes=fp32"]
LONG_COLLECTIVE = [
    "--set", "collectives.ops=all_reduce", "--set", "collectives.modes=back_to_back",
    "--set", "collectives.min_bytes=1048576", "--set", "collectives.max_bytes=1048576",
    "--set", "collectives.iters=100000",
]  # fmt: skip


def _tasks(out: Path, per_rank_args: list[list[str]], port: int) -> list[subprocess.Popen[str]]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE"))}
    procs = []
    for rank, args in enumerate(per_rank_args):
        env = {**base, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank),
               "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_TASKS_PER_NODE": "2",
               "SLURM_JOB_ID": str(port), "SLURM_LAUNCH_NODE_IPADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "PYTHONUNBUFFERED": "1"}  # fmt: skip
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "clusterbench", "run", *BASE, *args, "--out", str(out)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ))  # fmt: skip
    return procs


@pytest.mark.parametrize(
    ("rank1_args", "named"),
    [
        (["--only", "gemm,collectives", "--set", "collectives.max_bytes=1024"],
         "collectives.max_bytes"),
        (["--only", "gemm,memory"],
         "the benchmarks selected (gemm,memory against gemm,collectives)"),
    ],
)  # fmt: skip
def test_ranks_that_disagree_stop_at_once(tmp_path: Path, rank1_args, named) -> None:
    out = tmp_path / "run"
    t0 = time.monotonic()
    procs = _tasks(out, [["--only", "gemm,collectives"], rank1_args], port=29561)
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith("clusterbench: error: the ranks' configurations differ")
        assert f"rank 1 (host {HOST}): {named}" in lines[0]
    assert time.monotonic() - t0 < 60
    assert not (out / "results.json").exists()


def test_a_killed_rank_is_named_by_rank_0(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["--only", "gemm,collectives", "--timeout", "30", *LONG_COLLECTIVE]
    procs = _tasks(out, [args, args], port=29563)
    state = wait_for_activity(out, 1, "in all_reduce", timeout=120)
    os.kill(int(state["pid"]), signal.SIGKILL)
    _, err = procs[0].communicate(timeout=120)
    procs[1].communicate(timeout=30)
    assert procs[0].returncode == 3, err
    failure = next(line for line in err.splitlines() if "run failed" in line)
    assert failure.startswith(f"clusterbench: run failed: rank 1 on host {HOST} stopped"), err
    assert "in all_reduce of 1 MiB on group world" in failure
    assert f"waiting for it: rank 0 (host {HOST})" in failure
    assert f"rank 0 on host {HOST} failed" not in err  # the survivor does not blame itself
    results = load_results(out)
    assert results.run.status == "failed" and [e.rank for e in results.errors] == [1, 0]
    assert {m.rank for m in results.measurements if m.benchmark == "gemm"} == {0, 1}
