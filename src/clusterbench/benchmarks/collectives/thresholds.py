"""The ``collectives`` benchmark's limits: keys of the ``[thresholds]`` table (``--set
thresholds.KEY=VALUE``), each with its default; its findings read them with
``thresholds.of(CollectivesThresholds)``."""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.thresholds import check_positive

__all__ = ["CollectivesThresholds"]


@dataclass(frozen=True, kw_only=True, slots=True)
class CollectivesThresholds:
    """Limits the collectives verdicts apply."""

    busbw_min_efficiency: float = 0.80
    """Collective busbw at the largest size below this fraction of the link's peak (within a
    node what healthy NVLink of the SKU reaches, else its spec; the node's NICs across nodes)
    -> warn (cluster-benchmarking guide: links >= 80%)."""
    busbw_dip_ratio: float = 0.5
    """Back-to-back busbw at ``busbw_dip_sizes`` or more successive sizes from 1 MiB below this
    fraction of the best busbw at a smaller size -> warn (``collectives.busbw_dip``): on healthy
    links busbw grows with size to its plateau; the published healthy outputs the tests read
    never fall below 0.91 of it (back-to-back, from 1 MiB)."""
    busbw_dip_sizes: int = 2
    """How many successive sizes a dip must last: one size alone can be a burst of traffic
    beside the test."""

    def __post_init__(self) -> None:
        check_positive(self)
