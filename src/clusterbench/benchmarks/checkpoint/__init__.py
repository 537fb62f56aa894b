"""The ``checkpoint`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch) and its duration model (:mod:`.duration`)."""

from clusterbench.benchmarks.checkpoint.duration import MODEL
from clusterbench.benchmarks.checkpoint.settings import (
    FORMATS,
    STATES,
    CheckpointConfig,
    CheckpointMetrics,
    Format,
)
from clusterbench.benchmarks.checkpoint.thresholds import CheckpointThresholds
from clusterbench.registry import FROM_STANDARD, Benchmark

__all__ = ["FORMATS", "STATES", "CheckpointConfig", "CheckpointMetrics", "Format"]

BENCHMARK = Benchmark(
    name="checkpoint",
    level=3,
    scope="collective",
    suites=FROM_STANDARD,
    run="clusterbench.benchmarks.checkpoint.measure:checkpoint",
    description=(
        "Checkpoint save/load GB/s per format and state size, and the seconds of a whole "
        "checkpoint."
    ),
    settings=CheckpointConfig,
    metrics=CheckpointMetrics,
    thresholds=CheckpointThresholds,
    durations=MODEL,
    findings="clusterbench.benchmarks.checkpoint.findings:findings",
    section="clusterbench.benchmarks.checkpoint.section:section",
    figures="clusterbench.benchmarks.checkpoint.figures:figures",
)
