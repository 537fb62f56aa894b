"""What the ``collectives`` benchmark records (:class:`CollectivesMetrics`): declared below the
benchmarks and the run-wide analyses, which both select by it; its settings module re-exports it."""

from __future__ import annotations

from clusterbench.metrics import Metric, MetricSet

__all__ = ["CollectivesMetrics"]


class CollectivesMetrics(MetricSet, benchmark="collectives"):
    """One result per group, op, size and mode (``num_wrong``: per group and op); the tuning
    sweep's per op, size and NCCL setting."""

    algbw = Metric("GB/s", "higher", "algorithm bandwidth S / t (nccl-tests algbw)")
    busbw = Metric("GB/s", "higher", "bus bandwidth algbw x F, comparable with the link rate")
    latency_us = Metric("us", "lower", "time of one op, the mean over the group's ranks")
    latency_max_us = Metric("us", "lower", "time of one op on the group's slowest rank", tail=True)
    latency_p99_us = Metric(
        "us", "lower", "99th percentile of the per-op times (blocking mode)", tail=True
    )
    num_wrong = Metric(
        "count", "none", "wrong output elements over the size sweep (nccl-tests #wrong; any fails)"
    )
    tune_latency_us = Metric(
        "us",
        "lower",
        "time of one op under one NCCL setting: the median over repeats of the mean over ranks",
        only_when="collectives.tune=true on NCCL with 2 or more GPUs",
    )
    tune_busbw = Metric(
        "GB/s",
        "higher",
        "bus bandwidth under one NCCL setting, at the median time over repeats",
        only_when="collectives.tune=true on NCCL with 2 or more GPUs",
    )
