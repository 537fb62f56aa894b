"""The ``checkpoint`` benchmark's limits: keys of the ``[thresholds]`` table (``--set
thresholds.KEY=VALUE``), each with its default; its findings read them with
``thresholds.of(CheckpointThresholds)``."""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.thresholds import check_positive

__all__ = ["CheckpointThresholds"]


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckpointThresholds:
    """Limits the checkpoint verdicts apply."""

    checkpoint_min_save_gbps: float = 0.5
    """Checkpoint save below this many GB/s (checkpoints of 1 GB and more) -> info.  torch.save
    of the 125m model's 1.81 GiB state reached 0.639 GB/s on the H200 machine's local disk,
    docs/results/H200-level3.md."""
    checkpoint_stall_max_pct: float = 10.0
    """Training slowed by more than this % during an asynchronous checkpoint save -> warn."""
    checkpoint_min_free_ratio: float = 2.0
    """Free space in the checkpoint directory below this many checkpoints -> warn (keep the last
    good one while the next is written)."""

    def __post_init__(self) -> None:
        check_positive(self)
