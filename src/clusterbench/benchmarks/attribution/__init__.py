"""The ``attribution`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch) and its cost model (:mod:`.cost`)."""

from clusterbench.benchmarks.attribution.settings import (
    ACCUM_MIN_RISE_PCT,
    AttributionConfig,
    AttributionMetrics,
    AttributionModel,
    sweep_counts,
)

__all__ = [
    "ACCUM_MIN_RISE_PCT",
    "AttributionConfig",
    "AttributionMetrics",
    "AttributionModel",
    "sweep_counts",
]
