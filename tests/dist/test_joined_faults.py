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


# ----------------------------------------------------------------------------- torchrun, one node


def _torchrun(out: Path, args: list[str], port: int) -> subprocess.Popen[str]:
    """Real torchrun on this node, 2 CPU workers; its agent SIGTERMs the survivors of a death."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE"))}
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node",
            "2", "--max-restarts", "0", "--rdzv-backend", "c10d", "--rdzv-endpoint",
            f"127.0.0.1:{port}", "-m", "clusterbench", "run", *BASE, *args,
            "--out", str(out)]  # fmt: skip
    return subprocess.Popen(argv, env={**base, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def _flight(out: Path, rank: int) -> dict[str, object]:
    return dict(json.loads((out / "ranks" / f"rank-{rank:05d}.flight.json").read_text()))


def _assert_rank1_named_by_rank0(proc: subprocess.Popen[str], out: Path, doing: str) -> None:
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0, err
    assert "exitcode  : 3" in err  # rank 0 exited 3 (torchrun's summary), not killed by SIGTERM
    ours = [line for line in err.splitlines() if line.startswith("clusterbench:")]
    assert len(ours) == 1, err[-3000:]
    assert ours[0].startswith(f"clusterbench: run failed: rank 1 on host {HOST} stopped "
                              f"responding during {doing}"), ours  # fmt: skip
    assert f"waiting for it: rank 0 (host {HOST})" in ours[0]
    results = load_results(out)
    assert results.run.status == "failed" and [e.rank for e in results.errors] == [1, 0]
    assert results.errors[1].message.startswith(f"rank 0 on host {HOST} was waiting for rank 1")
    # the survivor's flight record says the launcher ended it; the dead rank's does not
    assert _flight(out, 0)["ended"] == "terminated by the launcher (SIGTERM)"
    assert _flight(out, 1)["ended"] == ""


def test_torchrun_a_rank_killed_in_a_collective_is_named_by_rank_0(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _torchrun(out, ["--only", "gemm,collectives", "--timeout", "30", *LONG_COLLECTIVE],
                     port=29565)  # fmt: skip
    state = wait_for_activity(out, 1, "in all_reduce", timeout=120)
    os.kill(int(state["pid"]), signal.SIGKILL)
    _assert_rank1_named_by_rank0(proc, out, "collectives, in all_reduce of 1 MiB on group world")
    assert {m.rank for m in load_results(out).measurements if m.benchmark == "gemm"} == {0, 1}


def test_torchrun_sigterm_reaches_a_rank_busy_in_its_own_work(tmp_path: Path) -> None:
    """Rank 1 dies while rank 0 computes (no collective to fail): torchrun's SIGTERM alone
    tells rank 0, which writes the results naming rank 1 before it goes."""
    out = tmp_path / "run"
    args = ["--only", "memory,gemm", "--timeout", "60", "--set", "memory.size_bytes=1048576",
            "--set", "gemm.shapes=512x512x512", "--set", "gemm.repeats=100000"]  # fmt: skip
    proc = _torchrun(out, args, port=29567)
    state = wait_for_activity(out, 1, "running", timeout=120)
    deadline = time.monotonic() + 120
    while _flight(out, 1)["benchmark"] != "gemm" or _flight(out, 0)["activity"] != "running":
        assert time.monotonic() < deadline, "the ranks never both ran their GEMMs"
        time.sleep(0.2)
    time.sleep(1.0)  # both inside their GEMMs
    os.kill(int(state["pid"]), signal.SIGKILL)
    _assert_rank1_named_by_rank0(proc, out, "gemm")
    results = load_results(out)
    assert results.errors[1].message.endswith("terminated by the launcher (SIGTERM)")
    assert {m.rank for m in results.measurements if m.benchmark == "memory"} == {0, 1}


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--join-timeout", "nan"], "--join-timeout must be a positive number of seconds, got nan"),
        (["--join-timeout", "0"], "--join-timeout must be a positive number of seconds, got 0.0"),
        (["--expect-nodes", "0"], "--expect-nodes must be at least 1, got 0"),
    ],
)
def test_bad_join_options_are_one_line_and_exit_2(tmp_path: Path, option, message) -> None:
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "clusterbench", "run", *BASE, "--only", "gemm", *option,
         "--out", str(out)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"clusterbench: error: {message}"]
    assert not out.exists()


def test_a_rank_that_never_comes_is_named_by_rank_0(tmp_path: Path) -> None:
    """Two of three srun tasks started: rank 0 waits --join-timeout for the third, then names
    the ranks and hosts that came in one line; both exit 3 and results.json says failed."""
    out = tmp_path / "run"
    args = ["--only", "gemm", "--join-timeout", "3"]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE"))}
    procs = []
    for rank in range(2):
        env = {**base, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank),
               "SLURM_STEP_NUM_TASKS": "3", "SLURM_STEP_TASKS_PER_NODE": "3",
               "SLURM_LAUNCH_NODE_IPADDR": "127.0.0.1", "MASTER_PORT": "29569",
               "PYTHONUNBUFFERED": "1"}  # fmt: skip
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "clusterbench", "run", *BASE, *args, "--out", str(out)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ))  # fmt: skip
    t0 = time.monotonic()
    done = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [3, 3], done
    assert time.monotonic() - t0 < 60
    line = (f"only 2 of 3 ranks joined within 3 s, from 1 node(s): {HOST} (ranks 0-1); never "
            "came: rank 2")  # fmt: skip
    assert done[0][1].splitlines() == [f"clusterbench: run failed: {line}; results kept in {out}"]
    assert done[1][1] == ""
    results = load_results(out)
    assert results.run.status == "failed" and results.run.finished is not None
    assert [(e.rank, e.message) for e in results.errors] == [(0, line)]
