"""The ``training`` benchmark's limits: keys of the ``[thresholds]`` table (``--set
thresholds.KEY=VALUE``), each with its default; its findings read them with
``thresholds.of(TrainingThresholds)``."""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.thresholds import check_positive

__all__ = ["TrainingThresholds"]


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
