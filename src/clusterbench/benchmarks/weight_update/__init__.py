"""The ``weight_update`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch) and its duration model (:mod:`.duration`)."""

from clusterbench.benchmarks.weight_update.duration import MODEL
from clusterbench.benchmarks.weight_update.settings import (
    WeightUpdateConfig,
    WeightUpdateMetrics,
)
from clusterbench.benchmarks.weight_update.thresholds import WeightUpdateThresholds
from clusterbench.registry import FROM_STANDARD, Benchmark

__all__ = ["WeightUpdateConfig", "WeightUpdateMetrics"]

BENCHMARK = Benchmark(
    name="weight_update",
    level=3,
    scope="per_device",
    suites=FROM_STANDARD,
    settings_from="training",
    run="clusterbench.benchmarks.weight_update.measure:weight_update",
    description=(
        "Optimizer step alone (GB/s of the bytes it must move), per optimizer and layout."
    ),
    settings=WeightUpdateConfig,
    metrics=WeightUpdateMetrics,
    thresholds=WeightUpdateThresholds,
    durations=MODEL,
    findings="clusterbench.benchmarks.weight_update.findings:findings",
    section="clusterbench.benchmarks.weight_update.section:section",
    figures="clusterbench.benchmarks.weight_update.figures:figures",
)
