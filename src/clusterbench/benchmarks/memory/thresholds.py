"""The ``memory`` benchmark's limits: keys of the ``[thresholds]`` table (``--set
thresholds.KEY=VALUE``), each with its default; its findings read them with
``thresholds.of(MemoryThresholds)``."""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.thresholds import check_positive

__all__ = ["MemoryThresholds"]


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryThresholds:
    """Limits the memory verdicts apply."""

    hbm_min_efficiency: float = 0.80
    """Device memory copy below this fraction of the spec bandwidth -> warn."""

    def __post_init__(self) -> None:
        check_positive(self)
