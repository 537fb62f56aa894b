"""The ``attribution`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch) and its duration model (:mod:`.duration`)."""

from clusterbench.benchmarks.attribution.duration import MODEL
from clusterbench.benchmarks.attribution.settings import (
    ACCUM_MIN_RISE_PCT,
    AttributionConfig,
    AttributionMetrics,
    AttributionModel,
    sweep_counts,
)
from clusterbench.benchmarks.attribution.thresholds import AttributionThresholds
from clusterbench.registry import FROM_STANDARD, Benchmark
from clusterbench.rules import PeerRules

__all__ = [
    "ACCUM_MIN_RISE_PCT",
    "BENCHMARK",
    "AttributionConfig",
    "AttributionMetrics",
    "AttributionModel",
    "sweep_counts",
]

BENCHMARK = Benchmark(
    name="attribution",
    level=3,
    scope="workload",
    suites=FROM_STANDARD,
    settings_from="training",
    run="clusterbench.benchmarks.attribution.measure:attribution",
    description=("Step time split into compute, memory, communication and coordination, per rank."),
    settings=AttributionConfig,
    metrics=AttributionMetrics,
    thresholds=AttributionThresholds,
    durations=MODEL,
    findings="clusterbench.benchmarks.attribution.findings:findings",
    section="clusterbench.benchmarks.attribution.section:section",
    figures="clusterbench.benchmarks.attribution.figures:figures",
    # its ranks are judged by its own findings (attribution.slow_rank, the straggler)
    peers=PeerRules(judged=False),
)
