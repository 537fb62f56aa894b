"""The ``weight_update`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch) and its cost model (:mod:`.cost`)."""

from clusterbench.benchmarks.weight_update.settings import (
    WeightUpdateConfig,
    WeightUpdateMetrics,
)

__all__ = ["WeightUpdateConfig", "WeightUpdateMetrics"]
