"""What the ``weight_update`` benchmark records (:class:`WeightUpdateMetrics`): declared below the
benchmarks and the run-wide analyses, which both select by it; its settings module re-exports it."""

from __future__ import annotations

from clusterbench.metrics import Metric, MetricSet

__all__ = ["WeightUpdateMetrics"]


class WeightUpdateMetrics(MetricSet, benchmark="weight_update"):
    """Per rank, per optimizer and layout (params: model, optimizer, layout, num_params,
    bytes_per_param)."""

    bandwidth = Metric(
        "GB/s", "higher", "bytes the update must move (bytes_per_param) / median update time"
    )
    step_time_ms = Metric("ms", "lower", "median time of one weight update of the whole model")
    update_rel_error = Metric(
        "ratio", "none", "one parameter's update against a float64 reference (params: tolerance)"
    )
