"""The ``transfer`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch) and its cost model (:mod:`.cost`)."""

from clusterbench.benchmarks.transfer.cost import MODEL
from clusterbench.benchmarks.transfer.settings import (
    DIRECTIONS,
    MEMORY_KINDS,
    Direction,
    MemoryKind,
    TransferConfig,
    TransferMetrics,
)
from clusterbench.registry import ALL_SUITES, Benchmark

__all__ = [
    "BENCHMARK",
    "DIRECTIONS",
    "MEMORY_KINDS",
    "Direction",
    "MemoryKind",
    "TransferConfig",
    "TransferMetrics",
]

BENCHMARK = Benchmark(
    name="transfer",
    level=1,
    scope="per_device",
    suites=ALL_SUITES,
    devices=frozenset({"cuda"}),
    run="clusterbench.benchmarks.transfer.measure:transfer",
    description=(
        "Host<->device (pinned, pageable, NUMA local/remote) and GPU<->GPU copy bandwidth."
    ),
    settings=TransferConfig,
    metrics=TransferMetrics,
    budget=MODEL,
    findings="clusterbench.benchmarks.transfer.findings:findings",
    section="clusterbench.benchmarks.transfer.section:section",
    figures="clusterbench.benchmarks.transfer.figures:figures",
)
