"""The ``tiny`` benchmark's limit: a key of the ``[thresholds]`` table, like the built-in ones."""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.thresholds import check_positive

__all__ = ["TinyThresholds"]


@dataclass(frozen=True, kw_only=True, slots=True)
class TinyThresholds:
    """Limits the ``tiny`` verdicts apply."""

    tiny_min_elements_per_s: float = 1.0
    """The slowest rank all-reducing fewer elements per second than this -> warn."""

    def __post_init__(self) -> None:
        check_positive(self)
