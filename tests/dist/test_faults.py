"""Real faults, not planted ones: a CPU worker killed (SIGKILL) or stopped (SIGSTOP) in the middle
of the collectives benchmark.  The first failure line must name that rank, with what it was
doing, and then the rank that only waited for it; what finished before stays on disk."""

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
TIMEOUT_S = 15


def _start(out: Path) -> subprocess.Popen[str]:
    # gemm finishes first (kept); collectives then runs long enough to be caught in an op
    args = [
        "run", "--device", "cpu", "--nproc", "2", "--out", str(out), "--timeout", str(TIMEOUT_S),
        "--only", "gemm,collectives", "--set", "gemm.shapes=64x64x64", "--set", "gemm.dtypes=fp32",
        "--set", "collectives.ops=all_reduce", "--set", "collectives.modes=back_to_back",
        "--set", "collectives.min_bytes=1048576", "--set", "collectives.max_bytes=1048576",
        "--set", "collectives.iters=100000",
    ]  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-m", "clusterbench", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip


def _rank1_in_collective(out: Path, proc: subprocess.Popen[str]) -> int:
    """Rank 1's pid, once its flight record says it is inside the all-reduce."""
    try:
        return int(wait_for_activity(out, 1, "in all_reduce", timeout=120)["pid"])
    except AssertionError:
        proc.kill()
        raise AssertionError(f"rank 1 never entered the all-reduce: {proc.communicate()}") from None


def _first_line_names_rank1(proc: subprocess.Popen[str], out: Path, what: str) -> None:
    _, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 3, stderr
    assert "Traceback" not in stderr
    failure = next(line for line in stderr.splitlines() if "run failed" in line)
    assert failure.startswith(f"clusterbench: run failed: rank 1 on host {HOST} {what}"), failure
    assert "in all_reduce of 1 MiB on group world" in failure
    assert f"waiting for it: rank 0 (host {HOST})" in failure
    results = load_results(out)
    assert results.run.status == "failed"
    assert [e.rank for e in results.errors] == [1, 0]
    assert results.errors[1].message.startswith(
        f"rank 0 on host {HOST} was waiting for rank 1 in collectives"
    )
    assert {m.rank for m in results.measurements if m.benchmark == "gemm"} == {0, 1}


def test_a_killed_worker_is_the_culprit(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _start(out)
    os.kill(_rank1_in_collective(out, proc), signal.SIGKILL)
    _first_line_names_rank1(proc, out, "was killed by SIGKILL during collectives")


def test_a_stopped_worker_is_the_culprit(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _start(out)
    pid = _rank1_in_collective(out, proc)
    os.kill(pid, signal.SIGSTOP)
    try:
        _first_line_names_rank1(proc, out, "stopped responding during collectives")
    finally:
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                break
