"""Level-1 verdicts (gemm, memory, transfer, the host inventory) on hand-built results with
known numbers."""

from __future__ import annotations

import math

import pytest

from clusterbench.analyses.hosts import findings as hosts_analysis
from clusterbench.analyses.hosts.findings import unknown_sku_findings
from clusterbench.analyses.run import analyze
from clusterbench.benchmarks.gemm import findings as gemm_analysis
from clusterbench.benchmarks.gemm.findings import (
    gemm_correctness_findings,
    gemm_efficiency_findings,
    mixed_precision_findings,
)
from clusterbench.benchmarks.memory import findings as memory_analysis
from clusterbench.benchmarks.memory.findings import hbm_findings
from clusterbench.benchmarks.transfer import findings as transfer_analysis
from clusterbench.benchmarks.transfer.findings import (
    host_device_findings,
    p2p_findings,
    pcie_findings,
)
from clusterbench.config import Thresholds
from clusterbench.schema import (
    Finding,
    GpuInfo,
    GpuSpecRef,
    HostInfo,
    Measurement,
    ParamValue,
    PCIeLink,
    Reference,
    Results,
    RunInfo,
    ToolInfo,
)

H200 = GpuSpecRef(
    sku="H200 SXM",
    dense_tflops={"fp32": 67, "tf32": 494.5, "bf16": 989, "fp16": 989, "fp8": 1979},
    hbm_gbps=4800,
    nvlink_gbps_per_dir=450,
    pcie_gen=5,
    pcie_width=16,
    source="datasheet",
)


def make_results(
    measurements: list[Measurement] | None = None, hosts: list[HostInfo] | None = None
) -> Results:
    return Results(
        tool=ToolInfo(version="0.1.0"),
        run=RunInfo(
            id="run-1",
            started="2026-11-01T00:00:00Z",
            suite="quick",
            world_size=8,
            num_nodes=1,
            backend="nccl",
            command="clusterbench run",
        ),
        hosts=hosts or [],
        measurements=measurements or [],
    )


def meas(
    benchmark: str,
    metric: str,
    value: float,
    *,
    unit: str,
    params: dict[str, ParamValue] | None = None,
    ref: float | None = None,
    kind: str = "spec_peak",
    device: str = "cuda:0",
    host: str = "h1",
) -> Measurement:
    reference = Reference(value=ref, kind=kind, source="test") if ref is not None else None  # type: ignore[arg-type]
    return Measurement(
        benchmark=benchmark,
        metric=metric,
        value=value,
        unit=unit,
        params=params or {},
        rank=0,
        host=host,
        device=device,
        reference=reference,
    )


def gemm_best(
    value: float, *, dtype: str = "bf16", ref: float | None = 989.0, **kw: str
) -> Measurement:
    params: dict[str, ParamValue] = {"dtype": dtype, "m": 8192, "n": 8192, "k": 8192}
    return meas("gemm", "tflops_best", value, unit="TFLOP/s", params=params, ref=ref, **kw)


def h2d(
    value: float, *, numa: str = "local", memory: str = "pinned", size: int = 1 << 30
) -> Measurement:
    params: dict[str, ParamValue] = {
        "direction": "h2d",
        "memory": memory,
        "numa": numa,
        "numa_node": 0,
        "size_bytes": size,
    }
    return meas(
        "transfer", "bandwidth", value, unit="GB/s", params=params, ref=63.0, kind="link_rate"
    )


def ids(findings: list[Finding]) -> list[str]:
    return [f.id for f in findings]


# --- GEMM ----------------------------------------------------------------------------------


def test_gemm_at_60_percent_of_peak_warns() -> None:
    findings = gemm_efficiency_findings(make_results([gemm_best(593.4)]), min_efficiency=0.65)
    assert len(findings) == 1
    f = findings[0]
    assert (f.id, f.severity, f.scope) == ("gemm.low_efficiency", "warn", "host:h1/cuda:0")
    assert f.evidence["efficiency"] == pytest.approx(0.6, abs=1e-3)
    assert "593.4" in f.message and "989.0" in f.message and "60%" in f.message
    assert "nvidia-smi" in f.fix


def test_gemm_at_80_percent_of_peak_is_fine() -> None:
    assert gemm_efficiency_findings(make_results([gemm_best(791.2)]), min_efficiency=0.65) == []


def test_gemm_without_spec_peak_is_not_judged() -> None:
    results = make_results([gemm_best(10.0, ref=None)])
    assert gemm_efficiency_findings(results, min_efficiency=0.65) == []


def test_threshold_override_changes_the_outcome() -> None:
    at_60 = make_results([gemm_best(593.4)])
    at_80 = make_results([gemm_best(791.2)])
    assert "gemm.low_efficiency" in ids(gemm_analysis.findings(at_60, Thresholds()))
    assert "gemm.low_efficiency" not in ids(
        gemm_analysis.findings(at_60, Thresholds(given={"gemm_min_efficiency": 0.5}))
    )
    assert "gemm.low_efficiency" in ids(
        gemm_analysis.findings(at_80, Thresholds(given={"gemm_min_efficiency": 0.85}))
    )


def test_bf16_only_1_5x_fp32_warns_on_gpu() -> None:
    results = make_results([gemm_best(67.0, dtype="fp32", ref=67), gemm_best(100.5)])
    findings = mixed_precision_findings(results, min_speedup=2.0)
    assert [(f.id, f.severity) for f in findings] == [("gemm.mixed_precision", "warn")]
    assert findings[0].evidence["speedup"] == pytest.approx(1.5)
    assert "1.50x" in findings[0].message


def test_bf16_15x_fp32_is_healthy_not_above_a_ceiling() -> None:
    # Datasheet dense bf16/fp32 on H200 is 989/67 ~ 15x: far above the seed's "2-3x", and fine.
    results = make_results([gemm_best(51.0, dtype="fp32", ref=67), gemm_best(800.0)])
    assert mixed_precision_findings(results, min_speedup=2.0) == []


def test_slow_bf16_on_cpu_is_only_info() -> None:
    results = make_results(
        [
            gemm_best(1.0, dtype="fp32", ref=None, device="cpu:0"),
            gemm_best(0.4, dtype="bf16", ref=None, device="cpu:0"),
        ]
    )
    findings = mixed_precision_findings(results, min_speedup=2.0)
    assert [(f.severity, f.scope) for f in findings] == [("info", "host:h1/cpu:0")]


def test_rel_error_over_tolerance_fails() -> None:
    params: dict[str, ParamValue] = {"dtype": "bf16", "tolerance": 0.02}
    bad = meas("gemm", "rel_error", 0.5, unit="ratio", params=params)
    nan = meas("gemm", "rel_error", math.nan, unit="ratio", params=params, device="cuda:1")
    good = meas("gemm", "rel_error", 0.001, unit="ratio", params=params, device="cuda:2")
    findings = gemm_correctness_findings(make_results([bad, nan, good]))
    assert [(f.id, f.severity, f.scope) for f in findings] == [
        ("gemm.wrong_results", "fail", "host:h1/cuda:0"),
        ("gemm.wrong_results", "fail", "host:h1/cuda:1"),
    ]
    assert "wrong results" in findings[0].message and "0.5" in findings[0].message


# --- memory --------------------------------------------------------------------------------


def copy_bw(value: float, size: int) -> Measurement:
    params: dict[str, ParamValue] = {"op": "copy", "size_bytes": size}
    return meas("memory", "bandwidth", value, unit="GB/s", params=params, ref=4800.0)


def test_hbm_copy_below_threshold_warns() -> None:
    findings = hbm_findings(make_results([copy_bw(3000.0, 1 << 31)]), min_efficiency=0.8)
    assert ids(findings) == ["memory.low_bandwidth"]
    assert "3,000" in findings[0].message and "4,800" in findings[0].message


def test_hbm_judges_the_best_size() -> None:
    results = make_results([copy_bw(2000.0, 1 << 20), copy_bw(4273.0, 1 << 31)])
    assert hbm_findings(results, min_efficiency=0.8) == []


# --- PCIe ----------------------------------------------------------------------------------


def gpu(index: int, *, gen: int, max_gen: int = 5, spec: GpuSpecRef | None = H200) -> GpuInfo:
    link = PCIeLink(gen=gen, width=16, max_gen=max_gen, max_width=16)
    return GpuInfo(index=index, name="NVIDIA H200", pcie=link, spec=spec)


def test_pcie_gen4_under_load_with_max_5_fails_with_fix() -> None:
    m = meas("transfer", "pcie_link_gen", 4, unit="gen", params={"max_gen": 5})
    findings = pcie_findings(
        make_results([m], hosts=[HostInfo(hostname="h1", gpus=[gpu(0, gen=1)])])
    )
    assert len(findings) == 1  # the idle reading of the same GPU adds nothing
    f = findings[0]
    assert (f.id, f.severity, f.scope) == ("pcie.low_gen", "fail", "host:h1/cuda:0")
    assert "gen 4" in f.message and "gen 5" in f.message
    for word in ("Reseat", "BIOS", "riser", "nvidia-smi -q -d PCIE"):
        assert word in f.fix


def test_pcie_width_under_load_fails() -> None:
    m = meas("transfer", "pcie_link_width", 8, unit="lanes", params={"max_width": 16})
    assert ids(pcie_findings(make_results([m]))) == ["pcie.low_width"]


def test_pcie_at_max_under_load_is_fine() -> None:
    m = meas("transfer", "pcie_link_gen", 5, unit="gen", params={"max_gen": 5})
    assert pcie_findings(make_results([m])) == []


def test_idle_only_low_gen_is_info_not_fail() -> None:
    hosts = [HostInfo(hostname="h1", gpus=[gpu(0, gen=1), gpu(1, gen=5)])]
    findings = pcie_findings(make_results(hosts=hosts))
    assert [(f.id, f.severity, f.scope) for f in findings] == [
        ("pcie.idle_reading", "info", "host:h1/cuda:0")
    ]
    assert "idle" in findings[0].message


# --- host <-> device -----------------------------------------------------------------------


def test_h2d_at_40_of_63_warns_with_numa_fix() -> None:
    findings = host_device_findings(
        make_results([h2d(40.0)]), min_efficiency=0.8, remote_numa_max_loss=0.2
    )
    assert ids(findings) == ["transfer.low_bandwidth"]
    f = findings[0]
    assert f.severity == "warn" and "40.0" in f.message and "63.0" in f.message
    assert "numactl --cpunodebind=0 --membind=0" in f.fix and "pin" in f.fix


def test_h2d_at_55_of_63_is_fine_and_pageable_is_not_judged() -> None:
    results = make_results([h2d(55.4), h2d(20.0, memory="pageable")])
    assert host_device_findings(results, min_efficiency=0.8, remote_numa_max_loss=0.2) == []


def test_remote_numa_much_slower_is_info() -> None:
    results = make_results([h2d(55.0), h2d(30.0, numa="remote")])
    findings = host_device_findings(results, min_efficiency=0.8, remote_numa_max_loss=0.2)
    assert [(f.id, f.severity) for f in findings] == [("transfer.remote_numa", "info")]
    assert "30.0" in findings[0].message and "55.0" in findings[0].message


# --- GPU <-> GPU, spec coverage ------------------------------------------------------------


def p2p(
    value: float, *, src: str, dst: str, mode: str = "oneway", access: bool = True
) -> Measurement:
    params: dict[str, ParamValue] = {
        "src": src,
        "dst": dst,
        "mode": mode,
        "p2p_access": access,
        "size_bytes": 1 << 30,
    }
    ref = 450.0 if mode == "oneway" else 900.0
    return meas("transfer", "p2p_bandwidth", value, unit="GB/s", params=params, ref=ref)


def test_p2p_below_80_percent_of_nvlink_warns() -> None:
    results = make_results(
        [p2p(395.0, src="cuda:0", dst="cuda:1"), p2p(300.0, src="cuda:1", dst="cuda:0")]
    )
    findings = p2p_findings(results, min_efficiency=0.8)
    assert [(f.id, f.scope) for f in findings] == [("p2p.low_bandwidth", "host:h1/cuda:1-cuda:0")]


def test_no_peer_access_warns_once_per_pair() -> None:
    results = make_results(
        [
            p2p(12.0, src="cuda:0", dst="cuda:1", access=False),
            p2p(12.0, src="cuda:1", dst="cuda:0", access=False),
            p2p(20.0, src="cuda:0", dst="cuda:1", mode="bidir", access=False),
        ]
    )
    findings = p2p_findings(results, min_efficiency=0.8)
    assert [(f.id, f.severity) for f in findings] == [("p2p.no_peer_access", "warn")]
    assert "nvidia-smi topo" in findings[0].fix


def test_unknown_sku_is_info_once_per_host() -> None:
    hosts = [HostInfo(hostname="h1", gpus=[gpu(i, gen=5, spec=None) for i in range(4)])]
    findings = unknown_sku_findings(make_results(hosts=hosts))
    assert [(f.id, f.severity, f.scope) for f in findings] == [
        ("spec.unknown_sku", "info", "host:h1")
    ]
    assert "peers only" in findings[0].message and findings[0].evidence["indices"] == [0, 1, 2, 3]


def test_each_benchmark_findings_runs_all_its_verdicts_in_order() -> None:
    hosts = [HostInfo(hostname="h1", gpus=[gpu(0, gen=5, spec=None)])]
    pcie = meas("transfer", "pcie_link_gen", 4, unit="gen", params={"max_gen": 5})
    slow_pair = p2p(300.0, src="cuda:1", dst="cuda:0")
    params: dict[str, ParamValue] = {"dtype": "bf16", "tolerance": 0.02}
    wrong = meas("gemm", "rel_error", 0.5, unit="ratio", params=params)
    fp32 = gemm_best(67.0, dtype="fp32", ref=67)
    results = make_results(
        [slow_pair, h2d(40.0), pcie, copy_bw(3000.0, 1 << 31), gemm_best(100.5), fp32, wrong],
        hosts=hosts,
    )
    t = Thresholds()
    assert ids(gemm_analysis.findings(results, t)) == [
        "gemm.wrong_results",
        "gemm.low_efficiency",
        "gemm.mixed_precision",
    ]
    assert ids(memory_analysis.findings(results, t)) == ["memory.low_bandwidth"]
    assert ids(transfer_analysis.findings(results, t)) == [
        "pcie.low_gen",
        "transfer.low_bandwidth",
        "p2p.low_bandwidth",
    ]
    assert ids(hosts_analysis.findings(results, t)) == ["spec.unknown_sku"]


def test_analyze_sorts_fail_warn_info() -> None:
    hosts = [HostInfo(hostname="h1", gpus=[gpu(0, gen=5, spec=None)])]
    params: dict[str, ParamValue] = {"dtype": "bf16", "tolerance": 0.02}
    results = make_results(
        [gemm_best(500.0), meas("gemm", "rel_error", 0.5, unit="ratio", params=params)],
        hosts=hosts,
    )
    findings = analyze(results, Thresholds())
    assert [f.severity for f in findings] == ["fail", "warn", "info"]
    assert ids(findings) == ["gemm.wrong_results", "gemm.low_efficiency", "spec.unknown_sku"]
