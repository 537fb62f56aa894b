"""The ``network`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch) and its cost model (:mod:`.cost`)."""

from clusterbench.benchmarks.network.settings import (
    NetworkConfig,
    NetworkMetrics,
    Tool,
)

__all__ = ["NetworkConfig", "NetworkMetrics", "Tool"]
