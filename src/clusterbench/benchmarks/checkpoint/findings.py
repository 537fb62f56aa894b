"""Verdicts on checkpointing (``checkpoint`` benchmark): slow saves, training stalls during an
asynchronous save, too little free space, and the predicted time of whole checkpoints
(``checkpoint_predict``).

Pure functions: a :class:`~clusterbench.schema.Results` in, a list of findings out.
"""

from __future__ import annotations

from clusterbench.benchmarks.checkpoint import CheckpointMetrics
from clusterbench.benchmarks.checkpoint.predict import prediction_findings
from clusterbench.benchmarks.checkpoint.thresholds import CheckpointThresholds
from clusterbench.judging.measurements import as_number, gpu_severity, scope_label
from clusterbench.schema import Finding, Results
from clusterbench.thresholds import Thresholds

__all__ = [
    "CHECKPOINT_MIN_SIZE_BYTES",
    "async_stall_findings",
    "findings",
    "free_space_findings",
    "save_bandwidth_findings",
]

CHECKPOINT_MIN_SIZE_BYTES = 1e9
"""Smaller checkpoints time latency rather than bandwidth; no bandwidth verdict on them."""

_SLOW_FIX = (
    "Write checkpoints to faster storage (local NVMe, a parallel filesystem), shard them with "
    "torch.distributed.checkpoint so that every rank writes its part, and save with "
    "dcp.async_save so that training goes on while the files are written."
)
_STALL_FIX = (
    "Keep the writing off the training ranks' critical path: async_save with "
    "async_checkpointer_type=AsyncCheckpointerType.PROCESS, pinned-memory staging "
    "(DefaultStager), fewer checkpoints, or faster storage."
)


def findings(results: Results, thresholds: Thresholds) -> list[Finding]:
    """Every checkpoint verdict, against ``thresholds.checkpoint_*``."""
    limits = thresholds.of(CheckpointThresholds)
    return [
        *save_bandwidth_findings(results, min_gbps=limits.checkpoint_min_save_gbps),
        *async_stall_findings(results, max_pct=limits.checkpoint_stall_max_pct),
        *free_space_findings(results, min_ratio=limits.checkpoint_min_free_ratio),
        *prediction_findings(results),
    ]


def save_bandwidth_findings(results: Results, *, min_gbps: float) -> list[Finding]:
    """Saves of at least 1 GB slower than ``min_gbps`` -> one info per host naming the formats
    (each format at the largest size it wrote)."""
    largest: dict[tuple[str, str], tuple[float, float]] = {}
    for m in CheckpointMetrics.save_gbps.select(results):
        size = as_number(m.params.get("size_bytes")) or 0.0
        key = (m.host, str(m.params.get("format")))
        if size >= largest.get(key, (-1.0, 0.0))[0]:
            largest[key] = (size, m.value)
    slow: dict[str, dict[str, float]] = {}
    for (host, fmt), (size, gbps) in largest.items():
        if size >= CHECKPOINT_MIN_SIZE_BYTES and gbps < min_gbps:
            slow.setdefault(host, {})[fmt] = gbps
    return [
        Finding(
            id="checkpoint.slow_save",
            severity="info",
            scope=scope_label(host),
            message=(
                "Checkpoint saves are slow: "
                + ", ".join(f"{fmt} {gbps:.2f} GB/s" for fmt, gbps in formats.items())
                + f" (below {min_gbps:g} GB/s)."
            ),
            evidence={"save_gbps": formats, "threshold_gbps": min_gbps},
            fix=_SLOW_FIX,
        )
        for host, formats in slow.items()
    ]


def async_stall_findings(results: Results, *, max_pct: float) -> list[Finding]:
    """Steps slower by more than ``max_pct`` % during an async save -> warn."""
    return [
        Finding(
            id="checkpoint.async_stall",
            severity=gpu_severity(results, "warn"),
            scope=scope_label(m.host),
            message=(
                f"Training steps run {m.value:.0f}% slower while dcp.async_save writes "
                f"(threshold {max_pct:g}%)."
            ),
            evidence={"async_stall_pct": m.value, "threshold_pct": max_pct, **m.params},
            fix=_STALL_FIX,
        )
        for m in CheckpointMetrics.async_stall_pct.select(results)
        if m.value > max_pct
    ]


def free_space_findings(results: Results, *, min_ratio: float) -> list[Finding]:
    """Free space below ``min_ratio`` x one checkpoint -> warn."""
    out = []
    for m in CheckpointMetrics.free_space_gb.select(results):
        size = as_number(m.params.get("checkpoint_bytes")) or 0.0
        if size <= 0 or m.value * 1e9 >= min_ratio * size:
            continue
        out.append(
            Finding(
                id="checkpoint.low_free_space",
                severity="warn",
                scope=scope_label(m.host),
                message=(
                    f"{m.params.get('directory')} ({m.params.get('filesystem')}) has "
                    f"{m.value:.1f} GB free, less than {min_ratio:g}x one checkpoint "
                    f"({size / 1e9:.3g} GB)."
                ),
                evidence={"free_gb": m.value, "checkpoint_bytes": size, "ratio": min_ratio},
                fix="Free space or point --set checkpoint.directory at a larger filesystem.",
            )
        )
    return out
