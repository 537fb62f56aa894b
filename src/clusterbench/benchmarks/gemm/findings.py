"""Verdicts on ``gemm``: wrong products, the best shape against the dense peak, and the
mixed-precision speed-up over fp32.

Pure functions: a :class:`~clusterbench.schema.Results` in, a list of findings out.
"""

from __future__ import annotations

import math

from clusterbench.benchmarks.gemm import GemmMetrics
from clusterbench.benchmarks.gemm.thresholds import GemmThresholds
from clusterbench.judging.measurements import as_number, ref_value, scope_label
from clusterbench.schema import Finding, Results
from clusterbench.thresholds import Thresholds

__all__ = [
    "MIXED_PRECISION_DTYPES",
    "findings",
    "gemm_correctness_findings",
    "gemm_efficiency_findings",
    "mixed_precision_findings",
]

MIXED_PRECISION_DTYPES = ("bf16", "fp16")


def findings(results: Results, thresholds: Thresholds) -> list[Finding]:
    """Every verdict on the gemm measurements: correctness, efficiency, mixed precision."""
    limits = thresholds.of(GemmThresholds)
    return [
        *gemm_correctness_findings(results),
        *gemm_efficiency_findings(results, min_efficiency=limits.gemm_min_efficiency),
        *mixed_precision_findings(results, min_speedup=limits.mixed_precision_min_speedup),
    ]


def gemm_correctness_findings(results: Results) -> list[Finding]:
    """GEMM relative error above its tolerance (or not finite) -> fail: wrong results."""
    out = []
    for m in GemmMetrics.rel_error.select(results):
        tolerance = as_number(m.params.get("tolerance"))
        if tolerance is None or (math.isfinite(m.value) and m.value <= tolerance):
            continue
        dtype = m.params.get("dtype")
        out.append(
            Finding(
                id="gemm.wrong_results",
                severity="fail",
                scope=scope_label(m.host, m.device),
                message=(
                    f"{dtype} GEMM gives wrong results: relative error {m.value:.3g} is above "
                    f"the tolerance {tolerance:.3g}."
                ),
                evidence={"dtype": dtype, "rel_error": m.value, "tolerance": tolerance},
                fix=(
                    "Drain this GPU and check it: `nvidia-smi -q -d ECC,ROW_REMAPPER`, Xid "
                    "errors in `dmesg | grep -i xid`, then `dcgmi diag -r 3`; replace it if "
                    "errors persist."
                ),
            )
        )
    return out


def gemm_efficiency_findings(results: Results, *, min_efficiency: float) -> list[Finding]:
    """Best GEMM below ``min_efficiency`` x the dense peak -> warn, per device and dtype."""
    out = []
    for m in GemmMetrics.tflops_best.select(results):
        peak = ref_value(m)
        if peak is None or m.value >= min_efficiency * peak:
            continue
        dtype = m.params.get("dtype")
        efficiency = m.value / peak
        out.append(
            Finding(
                id="gemm.low_efficiency",
                severity="warn",
                scope=scope_label(m.host, m.device),
                message=(
                    f"Best {dtype} GEMM reaches {m.value:.1f} TFLOP/s, {efficiency:.0%} of the "
                    f"{peak:.1f} TFLOP/s dense peak (threshold {min_efficiency:.0%})."
                ),
                evidence={
                    "dtype": dtype,
                    "tflops_best": m.value,
                    "peak_tflops": peak,
                    "efficiency": round(efficiency, 4),
                    "threshold": min_efficiency,
                },
                fix=(
                    "Check clocks, power and temperature while it runs: `nvidia-smi -q -d "
                    "PERFORMANCE,CLOCK,POWER,TEMPERATURE` (throttle reasons should be none, "
                    "power limit at default), persistence mode on (`nvidia-smi -pm 1`), and "
                    "a torch/cuBLAS build for this GPU."
                ),
            )
        )
    return out


def mixed_precision_findings(results: Results, *, min_speedup: float) -> list[Finding]:
    """BF16/FP16 best GEMM below ``min_speedup`` x FP32 -> warn on GPUs, info on CPUs."""
    best = {
        (m.host, m.device, m.params.get("dtype")): m.value
        for m in GemmMetrics.tflops_best.select(results)
    }
    out = []
    for (host, device, dtype), value in best.items():
        fp32 = best.get((host, device, "fp32"))
        if dtype not in MIXED_PRECISION_DTYPES or not fp32:
            continue
        speedup = value / fp32
        # A floor only.  The cluster-benchmarking guide's "FP16/BF16 2-3x FP32" is a lower bound,
        # not a ceiling: tensor cores make dense bf16 ~15x fp32 by the datasheet (H200: 989 / 67
        # TFLOP/s), so a ratio above 3 is healthy and must never warn.
        if speedup >= min_speedup:
            continue
        out.append(
            _mixed_precision_finding(
                host=host,
                device=device,
                dtype=str(dtype),
                numbers=(value, fp32, speedup, min_speedup),
            )
        )
    return out


def _mixed_precision_finding(
    *, host: str, device: str, dtype: str, numbers: tuple[float, float, float, float]
) -> Finding:
    value, fp32, speedup, min_speedup = numbers
    on_gpu = device.startswith("cuda")
    message = (
        f"{dtype} GEMM best {value:.1f} TFLOP/s is only {speedup:.2f}x fp32 ({fp32:.1f} "
        f"TFLOP/s); expected at least {min_speedup:.1f}x"
    )
    if on_gpu:
        fix = (
            "Make sure the low-precision GEMM runs on tensor cores: a torch/CUDA build for this "
            "GPU (`python -c 'import torch; print(torch.version.cuda, "
            "torch.cuda.get_device_capability())'`), shapes multiple of 16, no throttling "
            "under tensor-core load (`nvidia-smi -q -d PERFORMANCE`); train with torch.autocast."
        )
    else:
        message += " (common on CPUs without bf16/fp16 matrix units)"
        fix = (
            "Expected unless the CPU has AMX or AVX512_BF16 (`lscpu | grep -o "
            "'amx_bf16\\|avx512_bf16'`); keep fp32 on this CPU."
        )
    return Finding(
        id="gemm.mixed_precision",
        severity="warn" if on_gpu else "info",
        scope=scope_label(host, device),
        message=message + ".",
        evidence={
            "dtype": dtype,
            "tflops_best": value,
            "fp32_tflops_best": fp32,
            "speedup": round(speedup, 3),
            "threshold": min_speedup,
        },
        fix=fix,
    )
