"""The ``gemm`` benchmark: dense matrix-multiply throughput per device (:mod:`.measure`), its
settings and metrics (:mod:`.settings`, no torch) and its duration model (:mod:`.duration`)."""

from clusterbench.benchmarks.gemm.duration import MODEL
from clusterbench.benchmarks.gemm.settings import (
    DTYPES,
    TOLERANCE,
    Dtype,
    GemmConfig,
    GemmMetrics,
    check_shape_lists,
    parse_shape,
)
from clusterbench.benchmarks.gemm.thresholds import GemmThresholds
from clusterbench.registry import ALL_SUITES, Benchmark
from clusterbench.rules import PeerRules, VerdictLabel

__all__ = [
    "BENCHMARK",
    "DTYPES",
    "TOLERANCE",
    "Dtype",
    "GemmConfig",
    "GemmMetrics",
    "check_shape_lists",
    "parse_shape",
]

BENCHMARK = Benchmark(
    name="gemm",
    level=1,
    scope="per_device",
    suites=ALL_SUITES,
    run="clusterbench.benchmarks.gemm.measure:gemm",
    description="Matrix-multiply TFLOP/s per dtype over a sweep of shapes (best and geomean).",
    settings=GemmConfig,
    metrics=GemmMetrics,
    thresholds=GemmThresholds,
    durations=MODEL,
    findings="clusterbench.benchmarks.gemm.findings:findings",
    section="clusterbench.benchmarks.gemm.section:section",
    figures="clusterbench.benchmarks.gemm.figures:figures",
    # the best shape of a dtype is one figure whatever shape reaches it
    winner_params={GemmMetrics.tflops_best: frozenset("mnk")},
    peers=PeerRules(
        fix=(
            "Compare this GPU's clocks, power and temperature with its peers (`nvidia-smi -q -d "
            "PERFORMANCE,CLOCK,POWER,TEMPERATURE -i {index}`), check its cooling, drain it if it "
            "stays slow."
        )
    ),
    verdict_labels=(
        VerdictLabel(
            metric=GemmMetrics.tflops_best,
            group="GEMM",
            detail="{dtype}",
            order=0,
            detail_order=("bf16", "fp8", "fp16", "tf32", "fp32"),
        ),
    ),
)
