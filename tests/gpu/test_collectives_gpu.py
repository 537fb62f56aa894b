"""The collectives benchmark on two GPUs with NCCL: graph-mode latency and large-message busbw.

Bounds only catch a broken measurement (docs/reference.md: 2x H200 all_reduce busbw 284 GB/s at
128 MiB, 13-14 us at 8 B); speed targets belong to scripts/gpu_validate.sh.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from clusterbench import load_results
from clusterbench.collective_facts import OPS, bus_factor

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs"),
]


def test_collectives_two_gpus(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "clusterbench", "run", "--device", "cuda", "--nproc", "2",
         "--only", "collectives", "--set", "collectives.max_bytes=268435456",
         "--set", "collectives.factor=4", "--out", str(out)],
        capture_output=True, text=True, timeout=300, env={**os.environ}, check=False,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    results = load_results(out)
    assert results.run.status == "completed" and results.errors == [], results.errors
    ms = [m for m in results.measurements if m.benchmark == "collectives"]
    assert {m.params["op"] for m in ms} == set(OPS)
    assert all(m.value == 0 for m in ms if m.metric == "num_wrong")
    graph = [
        m for m in ms
        if m.metric == "latency_us" and m.params["mode"] == "graph" and m.params["size_bytes"] == 8
    ]  # fmt: skip
    assert any(m.params["op"] == "all_reduce" for m in graph), "no graph-mode latency at 8 B"
    assert all(0 < m.value < 1000 for m in graph)
    busbw = [m for m in ms if m.metric == "busbw" and m.params["mode"] == "back_to_back"]
    for m in busbw:
        algbw = next(a.value for a in ms if a.metric == "algbw" and a.params == m.params)
        assert m.value == pytest.approx(algbw * bus_factor(str(m.params["op"]), 2))
    # all_reduce at its largest size (the sweep stops each op at its own busbw plateau)
    all_reduce = [m for m in busbw if m.params["op"] == "all_reduce"]
    largest = max(int(m.params["size_bytes"] or 0) for m in all_reduce)
    top = [m for m in all_reduce if m.params["size_bytes"] == largest]
    assert top and top[0].value > 100, top
