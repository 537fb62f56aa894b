"""The ``attribution`` benchmark's limits: keys of the ``[thresholds]`` table (``--set
thresholds.KEY=VALUE``), each with its default; its findings read them with
``thresholds.of(AttributionThresholds)``."""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.thresholds import check_positive

__all__ = ["AttributionThresholds"]


@dataclass(frozen=True, kw_only=True, slots=True)
class AttributionThresholds:
    """Limits the attribution verdicts apply."""

    straggler_min_spread_pct: float = 5.0
    """A rank whose collectives start later than the others by more than this % of the step
    (and at least 1 ms) is the straggler -> fail; for a team's traces, a rank whose lateness
    costs the job this much of the step (and 1 ms) by the trace's what-if.  A busy-time
    outlier (``attribution.slow_rank``) must be this far above the others too."""

    def __post_init__(self) -> None:
        check_positive(self)
