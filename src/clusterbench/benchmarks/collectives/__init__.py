"""The ``collectives`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch), the per-op facts (:mod:`.facts`, no torch: bus factor, buffer
sizes, the size sweep) and its duration model (:mod:`.duration`)."""

from clusterbench.benchmarks.collectives.duration import MODEL
from clusterbench.benchmarks.collectives.settings import (
    MODES,
    TUNE_ALGOS,
    TUNE_OPS,
    TUNE_PROTOS,
    CollectivesConfig,
    CollectivesMetrics,
    DtypeAlias,
    TuneAlgo,
    TuneOp,
    TuneProto,
)
from clusterbench.benchmarks.collectives.thresholds import CollectivesThresholds
from clusterbench.registry import ALL_SUITES, Benchmark
from clusterbench.rules import VerdictLabel

__all__ = [
    "BENCHMARK",
    "MODES",
    "TUNE_ALGOS",
    "TUNE_OPS",
    "TUNE_PROTOS",
    "CollectivesConfig",
    "CollectivesMetrics",
    "DtypeAlias",
    "TuneAlgo",
    "TuneOp",
    "TuneProto",
]

BENCHMARK = Benchmark(
    name="collectives",
    level=2,
    scope="collective",
    suites=ALL_SUITES,
    run="clusterbench.benchmarks.collectives.measure:collectives",
    description=(
        "Collective busbw / algbw (GB/s) and latency per op, size and group (nccl-tests style)."
    ),
    settings=CollectivesConfig,
    metrics=CollectivesMetrics,
    thresholds=CollectivesThresholds,
    durations=MODEL,
    findings="clusterbench.benchmarks.collectives.findings:findings",
    section="clusterbench.benchmarks.collectives.section:section",
    figures="clusterbench.benchmarks.collectives.figures:figures",
    nccl_log="tune",
    verdict_labels=(
        VerdictLabel(
            metric=CollectivesMetrics.busbw, group="{op} busbw", detail="{group_size} GPUs"
        ),
    ),
)
