"""The ``tiny`` benchmark's settings and metrics (no torch: the CLI and analysis read them)."""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.metrics import Metric, MetricSet

__all__ = ["TinyConfig", "TinyMetrics"]


class TinyMetrics(MetricSet, benchmark="tiny"):
    elements_per_s = Metric("elements/s", "higher", "all-reduced elements per second")
    wrong = Metric("count", "none", "elements whose sum was not the world size")


@dataclass(kw_only=True, slots=True)
class TinyConfig:
    """Settings of the ``tiny`` benchmark."""

    size: int = 1024
    """Elements all-reduced."""
    repeats: int = 5
    """Timed all-reduces."""

    def __post_init__(self) -> None:
        if self.size < 1 or self.repeats < 1:
            raise ValueError("size and repeats must be at least 1")
