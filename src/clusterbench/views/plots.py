"""What a benchmark's part of the HTML report draws: :class:`Plot`, a plotly figure as plain
JSON beside the table it draws, and :class:`PlotContext`, what a figure may need beyond the
benchmark's own measurements (the base run of a comparison, whether the run spans hosts).

Figures are plain dicts in plotly's JSON form (``{"data": [...], "layout": {...}}``), so the
report is built fast without plotly's per-property validation; the tests validate each one
against plotly's schema.  Each benchmark's figures are ``benchmarks/<name>/figures.py``'s
``figures(measurements, ctx) -> list[Plot]``, named by its :class:`~clusterbench.registry.Benchmark`
declaration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clusterbench.schema import Measurement
from clusterbench.thresholds import Thresholds
from clusterbench.views.cells import Grid, Matrix

__all__ = ["Plot", "PlotContext"]


@dataclass(frozen=True)
class PlotContext:
    multi_host: bool = False
    thresholds: Thresholds = field(default_factory=Thresholds)
    """The run's thresholds, so that what a figure marks (the slow node, the straggler) is what
    the run's findings name."""
    base: list[Measurement] | None = None
    """In a comparison (``clusterbench report BASE NEW``): the base run's measurements of the
    same benchmark, for figures that draw the base beside the new run; None otherwise."""


@dataclass
class Plot:
    title: str
    figure: dict[str, Any]
    """plotly's JSON form: ``{"data": [trace, ...], "layout": {...}}``; every axis title
    carries its unit."""
    table: Grid | Matrix | None = None
    """The numbers the figure draws, shown beside it (None: the section's own tables do)."""
    notes: list[str] = field(default_factory=list)
    """One line each under the figure: what is marked and why (the slow node, the straggler)."""
