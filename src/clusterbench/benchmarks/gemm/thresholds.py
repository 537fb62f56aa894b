"""The ``gemm`` benchmark's limits: keys of the ``[thresholds]`` table (``--set
thresholds.KEY=VALUE``), each with its default; its findings read them with
``thresholds.of(GemmThresholds)``."""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.thresholds import check_positive

__all__ = ["GemmThresholds"]


@dataclass(frozen=True, kw_only=True, slots=True)
class GemmThresholds:
    """Limits the gemm verdicts apply."""

    gemm_min_efficiency: float = 0.65
    """Best GEMM below this fraction of the dense peak -> warn (cluster-benchmarking guide:
    >65%)."""
    mixed_precision_min_speedup: float = 2.0
    """BF16/FP16 GEMM below this multiple of FP32 -> warn (cluster-benchmarking guide: 2-3x)."""

    def __post_init__(self) -> None:
        check_positive(self)
