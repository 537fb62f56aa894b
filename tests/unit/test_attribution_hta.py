"""Cross-check: our split of a GPU trace against HolisticTraceAnalysis' temporal breakdown.

Runs where HTA is installed (`pip install ".[hta]"`, PyPI `traceinsight`). The trace is
synthetic but in Kineto's format: three profiler steps, each a GEMM and an elementwise kernel
on one stream, a 100 µs gap, then an NCCL kernel on another stream.  HTA drops the last step
and measures from the first kernel to the last, so the two agree to a fraction of a point:
HTA idle ≈ our coordination, HTA compute kernels ≈ our compute + memory, HTA non-compute ≈
our communication.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clusterbench.benchmarks.attribution.trace import step_breakdowns

KERNELS = (
    ("sm90_xmma_gemm_bf16", 2, 302, 7),
    ("elementwise_kernel", 302, 502, 7),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 602, 1000, 20),
)


def kineto_trace() -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    corr = 0
    for step, t0 in ((1, 0.0), (2, 1000.0), (3, 2000.0)):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                       "pid": 1, "tid": 1, "ts": t0, "dur": 1000.0, "args": {}})  # fmt: skip
        for name, start, end, stream in KERNELS:
            corr += 1
            ids = {"correlation": corr, "External id": corr}
            launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                      "tid": 1, "ts": t0 + start - 1, "dur": 0.5, "args": ids}  # fmt: skip
            events.append(launch)
            events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream,
                           "ts": t0 + start, "dur": end - start,
                           "args": {**ids, "stream": stream, "device": 0,
                                    "grid": [1, 1, 1], "block": [1, 1, 1]}})  # fmt: skip
    return {"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 1},
            "deviceProperties": [], "traceEvents": events}  # fmt: skip


def test_our_split_of_the_trace() -> None:
    steps = step_breakdowns(kineto_trace()["traceEvents"])
    assert [s.step for s in steps] == [1, 2, 3]
    p = steps[0].percentages()
    assert p["compute"] == pytest.approx(30.0) and p["memory"] == pytest.approx(20.0)
    assert p["communication"] == pytest.approx(39.8) and p["coordination"] == pytest.approx(10.2)


def test_agrees_with_hta_temporal_breakdown(tmp_path: Path) -> None:
    trace_analysis = pytest.importorskip("hta.trace_analysis")
    (tmp_path / "rank-0.json").write_text(json.dumps(kineto_trace()))
    hta = trace_analysis.TraceAnalysis(trace_dir=str(tmp_path))
    row = hta.get_temporal_breakdown(visualize=False).iloc[0]
    ours = step_breakdowns(kineto_trace()["traceEvents"])[0].percentages()
    assert row["idle_time_pctg"] == pytest.approx(ours["coordination"], abs=0.5)
    assert row["compute_time_pctg"] == pytest.approx(ours["compute"] + ours["memory"], abs=0.5)
    assert row["non_compute_time_pctg"] == pytest.approx(ours["communication"], abs=0.5)
