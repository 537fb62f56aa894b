"""The ``dataloader`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch) and its cost model (:mod:`.cost`)."""

from clusterbench.benchmarks.dataloader.settings import (
    DATASETS,
    DataloaderConfig,
    DataloaderMetrics,
    DatasetName,
    ImageModel,
)

__all__ = ["DATASETS", "DataloaderConfig", "DataloaderMetrics", "DatasetName", "ImageModel"]
