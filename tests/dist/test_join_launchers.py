"""Joining a run under mpirun, and under the environment srun gives each task."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clusterbench import load_results

pytestmark = pytest.mark.dist

ARGS = ["--device", "cpu", "--only", "gemm", "--set", "gemm.shapes=64x64x64",
        "--set", "gemm.dtypes=fp32"]  # fmt: skip


def _check(out: Path, world: int) -> None:
    results = load_results(out)
    assert results.run.status == "completed"
    assert results.run.world_size == world
    assert {m.rank for m in results.measurements} == set(range(world))


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun")
def test_joins_under_mpirun(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
           "-x", "MASTER_ADDR=127.0.0.1", "-x", "MASTER_PORT=29533", "-x", "PATH",
           sys.executable, "-m", "clusterbench", "run", *ARGS, "--out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    _check(out, 2)


def test_joins_with_srun_task_environment(tmp_path: Path) -> None:
    """Two tasks started with the variables srun sets (SLURM_PROCID, SLURM_STEP_NUM_TASKS, ...)."""
    out = tmp_path / "run"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE"))}
    procs = []
    for rank in range(2):
        env = {**base, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank),
               "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_TASKS_PER_NODE": "2",
               "SLURM_JOB_ID": "4242", "SLURM_LAUNCH_NODE_IPADDR": "127.0.0.1"}  # fmt: skip
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "clusterbench", "run", *ARGS, "--out", str(out)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ))  # fmt: skip
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode in (0, 1), err[-2000:]
    _check(out, 2)


def test_mpirun_without_master_addr_is_one_clear_line(tmp_path: Path) -> None:
    env = {**os.environ, "OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"}
    env.pop("MASTER_ADDR", None)
    proc = subprocess.run(
        [sys.executable, "-m", "clusterbench", "run", *ARGS, "--out", str(tmp_path / "r")],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "MASTER_ADDR is not set" in lines[0]
