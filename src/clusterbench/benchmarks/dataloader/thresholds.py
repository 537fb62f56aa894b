"""The ``dataloader`` benchmark's limits: keys of the ``[thresholds]`` table (``--set
thresholds.KEY=VALUE``), each with its default; its findings read them with
``thresholds.of(DataloaderThresholds)``."""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.thresholds import check_positive

__all__ = ["DataloaderThresholds"]


@dataclass(frozen=True, kw_only=True, slots=True)
class DataloaderThresholds:
    """Limits the dataloader verdicts apply."""

    gpu_busy_min: float = 0.90
    """GPU busy below this fraction while training with the real data loader -> input-bound
    (cluster-benchmarking guide: utilisation under 90% means the input pipeline or coordination
    holds it back)."""

    def __post_init__(self) -> None:
        check_positive(self)
