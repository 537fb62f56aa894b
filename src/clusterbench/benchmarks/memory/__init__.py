"""The ``memory`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch) and its cost model (:mod:`.cost`)."""

from clusterbench.benchmarks.memory.settings import (
    OPS,
    MemoryConfig,
    MemoryMetrics,
    Op,
)

__all__ = ["OPS", "MemoryConfig", "MemoryMetrics", "Op"]
