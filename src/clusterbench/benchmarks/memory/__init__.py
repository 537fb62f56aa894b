"""The ``memory`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch) and its duration model (:mod:`.duration`)."""

from clusterbench.benchmarks.memory.duration import MODEL
from clusterbench.benchmarks.memory.settings import (
    OPS,
    MemoryConfig,
    MemoryMetrics,
    Op,
)
from clusterbench.benchmarks.memory.thresholds import MemoryThresholds
from clusterbench.registry import ALL_SUITES, Benchmark
from clusterbench.rules import PeerRules, VerdictLabel

__all__ = ["OPS", "MemoryConfig", "MemoryMetrics", "Op"]

BENCHMARK = Benchmark(
    name="memory",
    level=1,
    scope="per_device",
    suites=ALL_SUITES,
    run="clusterbench.benchmarks.memory.measure:memory",
    description="Device memory bandwidth (GB/s): copy, read and write of large buffers.",
    settings=MemoryConfig,
    metrics=MemoryMetrics,
    thresholds=MemoryThresholds,
    durations=MODEL,
    findings="clusterbench.benchmarks.memory.findings:findings",
    section="clusterbench.benchmarks.memory.section:section",
    figures="clusterbench.benchmarks.memory.figures:figures",
    peers=PeerRules(
        fix=(
            "Check this GPU's memory clock and health (`nvidia-smi -q -d CLOCK,ECC,ROW_REMAPPER -i "
            "{index}`); pending row remaps need a GPU reset."
        )
    ),
    verdict_labels=(
        VerdictLabel(metric=MemoryMetrics.bandwidth, group="HBM", detail="{op}", order=1),
    ),
)
