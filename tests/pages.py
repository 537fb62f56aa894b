"""A run's analysis for the tests that render pages from chosen parts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from clusterbench.analyses.run import RunAnalysis
from clusterbench.schema import Results
from clusterbench.thresholds import Thresholds
from clusterbench.views.cells import Section
from clusterbench.views.plots import Plot


def analysis(
    results: Results,
    sections: Sequence[Section] | None = None,
    plots: Mapping[str, Sequence[Plot]] | None = None,
    *,
    run_dir: Path | None = None,
    **kw: Any,
) -> RunAnalysis:
    """``results`` as the pages read them; ``sections``/``plots`` given, else the registry's
    (``plots={}``: none)."""
    run = RunAnalysis(results, run_dir=run_dir, **kw)
    if sections is not None:
        run.sections = list(sections)
    if plots is not None:
        run.plots = plots
    return run


def analysed(results: Results, thresholds: Thresholds | None = None) -> RunAnalysis:
    """The run a run part is called with (its findings, section, figures): ``results`` judged
    by ``thresholds`` (default: the run's own)."""
    run = RunAnalysis(results)
    if thresholds is not None:
        run.thresholds = thresholds
    return run
