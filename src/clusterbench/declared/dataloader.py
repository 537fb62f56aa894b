"""What the ``dataloader`` benchmark records (:class:`DataloaderMetrics`): declared below the
benchmarks and the run-wide analyses, which both select by it; its settings module re-exports it."""

from __future__ import annotations

from clusterbench.metrics import Metric, MetricSet

__all__ = ["DataloaderMetrics"]


class DataloaderMetrics(MetricSet, benchmark="dataloader"):
    loader_samples_per_s = Metric(
        "samples/s", "higher", "samples the DataLoader delivers to the device, per loader setting"
    )
    step_samples_per_s = Metric(
        "samples/s", "higher", "samples the training step consumes from a batch on the device"
    )
    gpu_busy = Metric(
        "%", "none", "device busy while training from the loader: 100 x t_step / t_wall"
    )
