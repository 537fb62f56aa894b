"""The ``checkpoint`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch) and its cost model (:mod:`.cost`)."""

from clusterbench.benchmarks.checkpoint.settings import (
    FORMATS,
    STATES,
    CheckpointConfig,
    CheckpointMetrics,
    Format,
)

__all__ = ["FORMATS", "STATES", "CheckpointConfig", "CheckpointMetrics", "Format"]
