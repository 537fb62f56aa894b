"""The ``weight_update`` benchmark's limits: keys of the ``[thresholds]`` table (``--set
thresholds.KEY=VALUE``), each with its default; its findings read them with
``thresholds.of(WeightUpdateThresholds)``."""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.thresholds import check_positive

__all__ = ["WeightUpdateThresholds"]


@dataclass(frozen=True, kw_only=True, slots=True)
class WeightUpdateThresholds:
    """Limits the weight_update verdicts apply."""

    weight_update_min_vs_hbm: float = 0.5
    """The best optimizer step of a layout below this fraction of the copy bandwidth the memory
    benchmark measured on the same device -> warn.  A fused AdamW step is one pass over its
    seven tensor streams: 268M fp32 parameters in 2.2 ms on an H200, 3.4 TB/s of 28 B/param,
    about 80% of the 4.27 TB/s copy (docs/reference.md); the bottleneck-analysis paper saw FP16
    updates at 65% of theoretical HBM on H100.  Foreach AdamW writes and re-reads temporaries,
    about three times the necessary bytes, so below half the step is not on a fused path."""

    def __post_init__(self) -> None:
        check_positive(self)
