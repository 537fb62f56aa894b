"""The network benchmark on one node with 2 CPU workers: TCP over loopback, both tools."""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from tests.helpers import cli

from clusterbench import load_results

pytestmark = pytest.mark.dist

HOST = socket.gethostname()


def _run(out: Path, *sets: str) -> subprocess.CompletedProcess[str]:
    args = ["run", "--device", "cpu", "--nproc", "2", "--only", "network", "--out", str(out)]
    for item in ("network.duration_s=1", "network.latency_round_trips=100", *sets):
        args += ["--set", item]
    return cli(*args, timeout=120)


@pytest.mark.parametrize("tool", ["socket", "iperf3"])
def test_network_over_loopback(tmp_path: Path, tool: str) -> None:
    if tool == "iperf3" and shutil.which("iperf3") is None:
        pytest.skip("iperf3 not installed")
    out = tmp_path / "run"
    proc = _run(out, f"network.tool={tool}")
    assert proc.returncode in (0, 1), proc.stderr
    results = load_results(out)
    assert results.errors == [] and results.run.status == "completed"
    by_metric = {m.metric: m for m in results.measurements if m.benchmark == "network"}
    tcp = by_metric["tcp_throughput"]
    assert tcp.value > 0 and tcp.unit == "Gb/s" and tcp.rank == 0
    assert tcp.params == {
        "src_host": HOST,
        "dst_host": HOST,
        "loopback": True,
        "streams": 2,
        "tool": tool,
    }
    latency = by_metric["tcp_latency_us"]
    assert latency.unit == "us" and latency.stats is not None and latency.stats.samples == 100
    assert 0 < latency.value < 1e5
    assert "rdma_write_bw" not in by_metric  # one node: no RDMA pair
