"""The ``network`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch) and its duration model (:mod:`.duration`)."""

from clusterbench.benchmarks.network.duration import MODEL
from clusterbench.benchmarks.network.settings import (
    NetworkConfig,
    NetworkMetrics,
    Tool,
)
from clusterbench.benchmarks.network.thresholds import NetworkThresholds
from clusterbench.registry import FROM_STANDARD, Benchmark

__all__ = ["NetworkConfig", "NetworkMetrics", "Tool"]

BENCHMARK = Benchmark(
    name="network",
    level=2,
    scope="collective",
    suites=FROM_STANDARD,
    run="clusterbench.benchmarks.network.measure:network",
    description=(
        "Host network: NIC rates, TCP throughput/latency and RDMA bandwidth between node pairs."
    ),
    settings=NetworkConfig,
    metrics=NetworkMetrics,
    thresholds=NetworkThresholds,
    durations=MODEL,
    findings="clusterbench.benchmarks.network.findings:findings",
    section="clusterbench.benchmarks.network.section:section",
    figures="clusterbench.benchmarks.network.figures:figures",
)
