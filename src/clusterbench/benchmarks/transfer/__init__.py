"""The ``transfer`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch) and its cost model (:mod:`.cost`)."""

from clusterbench.benchmarks.transfer.settings import (
    DIRECTIONS,
    MEMORY_KINDS,
    Direction,
    MemoryKind,
    TransferConfig,
    TransferMetrics,
)

__all__ = [
    "DIRECTIONS",
    "MEMORY_KINDS",
    "Direction",
    "MemoryKind",
    "TransferConfig",
    "TransferMetrics",
]
