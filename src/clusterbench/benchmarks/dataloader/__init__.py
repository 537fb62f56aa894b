"""The ``dataloader`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch) and its duration model (:mod:`.duration`)."""

from clusterbench.benchmarks.dataloader.duration import MODEL
from clusterbench.benchmarks.dataloader.settings import (
    DATASETS,
    DataloaderConfig,
    DataloaderMetrics,
    DatasetName,
    ImageModel,
)
from clusterbench.benchmarks.dataloader.thresholds import DataloaderThresholds
from clusterbench.registry import FROM_STANDARD, Benchmark

__all__ = ["DATASETS", "DataloaderConfig", "DataloaderMetrics", "DatasetName", "ImageModel"]

BENCHMARK = Benchmark(
    name="dataloader",
    level=3,
    scope="per_device",
    suites=FROM_STANDARD,
    run="clusterbench.benchmarks.dataloader.measure:dataloader",
    description=(
        "Input pipeline: DataLoader rate over files vs the training step's rate; device busy %."
    ),
    settings=DataloaderConfig,
    metrics=DataloaderMetrics,
    thresholds=DataloaderThresholds,
    durations=MODEL,
    findings="clusterbench.benchmarks.dataloader.findings:findings",
    section="clusterbench.benchmarks.dataloader.section:section",
    figures="clusterbench.benchmarks.dataloader.figures:figures",
)
