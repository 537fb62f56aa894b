"""What the ``training`` benchmark declares that the run-wide analyses read too: the figures it
records (:class:`TrainingMetrics`), the world sizes it trains at by default, how far the
partition analysis predicts by default, and its limits (:class:`TrainingThresholds`, which the
cost analysis judges the scaling by).  Its settings and thresholds modules re-export them."""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.metrics import Metric, MetricSet
from clusterbench.thresholds import check_positive

__all__ = [
    "PARTITION_PREDICT_UP_TO",
    "TrainingMetrics",
    "TrainingThresholds",
    "default_world_sizes",
]

PARTITION_PREDICT_UP_TO = 256
"""The default of ``partition_predict_up_to``: the most GPUs the partition analysis predicts
the time to batch for."""


def default_world_sizes(world_size: int) -> list[int]:
    """1, 2, 4, ... up to ``world_size``, and ``world_size`` itself."""
    sizes = [1 << i for i in range(world_size.bit_length())]
    return sorted({*sizes, world_size})


class TrainingMetrics(MetricSet, benchmark="training"):
    """Every figure of the ``training`` benchmark (group rank 0 records them)."""

    step_time_ms = Metric("ms", "lower", "median optimizer step time, all micro-steps")
    tokens_per_s_per_gpu = Metric(
        "tokens/s", "higher", "decoder throughput per GPU: global batch x T / step time / w"
    )
    tokens_per_s = Metric("tokens/s", "higher", "decoder throughput of the whole group")
    samples_per_s_per_gpu = Metric(
        "samples/s",
        "higher",
        "encoder or vision throughput per GPU: global batch / step / w",
        only_when="an encoder or vision model (a decoder's throughput is in tokens)",
    )
    samples_per_s = Metric(
        "samples/s",
        "higher",
        "encoder or vision throughput of the group",
        only_when="an encoder or vision model (a decoder's throughput is in tokens)",
    )
    model_tflops = Metric("TFLOP/s", "higher", "model FLOPs per second per GPU (params: formula)")
    mfu = Metric(
        "%",
        "none",
        "model FLOPs utilisation against the GPU spec's dense peak",
        only_when="a GPU whose spec gives a dense peak",
    )
    hfu = Metric(
        "%",
        "none",
        "hardware FLOPs utilisation: MFU with the recomputed FLOPs added",
        only_when="activation checkpointing on a GPU whose spec gives a dense peak",
    )
    mfu_vs_gemm = Metric(
        "%",
        "none",
        "model FLOPs against a measured 8192^3 matmul's TFLOP/s",
        only_when="a GPU whose spec gives a dense peak (the matmul is measured there)",
    )
    peak_memory_gb = Metric(
        "GB",
        "none",
        "peak allocated device memory over the timed steps",
        only_when="a CUDA device",
    )
    loss = Metric("nats", "none", "loss of the last timed step (finite: the steps trained)")
    gradient_bytes = Metric(
        "bytes",
        "none",
        "gradient bytes one data-parallel step synchronises: trainable numel x reduced size",
        only_when="the scaling series of a data-parallel strategy (ddp, zero1, fsdp2, zero2)",
    )
    scaling_efficiency = Metric(
        "%", "none", "weak (X(N) / (N X(1))) or strong (t(1) / (N t(N))) scaling efficiency"
    )
    fits = Metric(
        "bool",
        "none",
        "a sweep combination or partition candidate ran (1) or did not (0, params: reason)",
        only_when="training.sweep or training.partition",
    )
    partition_time_to_batch_ms = Metric(
        "ms",
        "lower",
        "partition search: time to process the global batch (the optimizer step time)",
        only_when="training.partition",
    )
    partition_tokens_per_s = Metric(
        "tokens/s",
        "higher",
        "partition search: decoder throughput of the candidate's d ranks, global batch x T / time",
        only_when="training.partition with a decoder model",
    )
    partition_samples_per_s = Metric(
        "samples/s",
        "higher",
        "partition search: encoder or vision throughput of the candidate's d ranks",
        only_when="training.partition with an encoder or vision model",
    )
    partition_peak_memory_gb = Metric(
        "GB",
        "none",
        "partition search: peak allocated device memory of the candidate (its largest rank)",
        only_when="training.partition on a CUDA device",
    )
    accum_step_time_ms = Metric("ms", "lower", "grad-accum sweep: step time with DDP's sync")
    compute_only_step_time_ms = Metric(
        "ms", "lower", "grad-accum sweep: the same step with every micro-step under no_sync"
    )
    sync_idle_ms = Metric("ms", "lower", "step time - compute-only step time (floored at 0)")
    sync_idle_fraction = Metric("%", "none", "synchronisation idle as a share of the step time")


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainingThresholds:
    """Limits the training verdicts apply."""

    scaling_min_efficiency_warn: float = 0.90
    """Training scaling efficiency below this -> warn (cluster-benchmarking guide: >= 90%)."""
    scaling_min_efficiency_fail: float = 0.80
    """...and below this -> fail (cluster-benchmarking guide: below 80% there is a bottleneck)."""
    mfu_min: float = 0.40
    """MFU below this for models of 1.3B parameters and more -> warn.  The cluster-benchmarking
    guide expects 50-60% on H100; public large runs reach 41-48% (Megatron-LM) and 33-39%
    (torchtitan 8B FSDP), docs/reference.md."""

    def __post_init__(self) -> None:
        check_positive(self)
