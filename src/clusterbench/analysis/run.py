"""One analysis per run: the run's results and everything derived from them, each computed
once, on first use, and read by every page of the run (the console, summary.md, report.html)
and by its exports."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from clusterbench.schema import Results, one_round
from clusterbench.thresholds import Thresholds, run_thresholds

if TYPE_CHECKING:
    from clusterbench.analysis.advice import Advice
    from clusterbench.analysis.compare import Comparison
    from clusterbench.analysis.drain import DrainList
    from clusterbench.analysis.verdict import NodeVerdict
    from clusterbench.views.cells import Section
    from clusterbench.views.plots import Plot

__all__ = ["RunAnalysis"]


@dataclass(eq=False)
class RunAnalysis:
    """A run as its pages show it.  ``results`` hold the findings (``finish`` analyses them
    once, before anything is rendered); the rest is derived from them on first use and kept.

    ``comparison``: the run against a baseline or an earlier run (``run --baseline``,
    ``report --compare``); ``base``: that earlier run, whose measurements the plots draw beside
    this run's; ``run_dir``: the run folder (the telemetry series, the prices of cost.json).
    A derived part may be given instead of computed by assigning it (``run.plots = {...}``).
    """

    results: Results
    run_dir: Path | None = None
    comparison: Comparison | None = None
    base: Results | None = None

    @cached_property
    def thresholds(self) -> Thresholds:
        return run_thresholds(self.results)

    @cached_property
    def one_round(self) -> Results:
        """The round the benchmarks' verdicts, sections and plots show (the whole run unless a
        soak)."""
        return one_round(self.results)

    def add_comparison(self, comparison: Comparison) -> None:
        """The run against a baseline or an earlier run: its regressions join the findings."""
        self.comparison = comparison
        self.results.findings = [*self.results.findings, *comparison.findings]

    @cached_property
    def node_verdicts(self) -> list[NodeVerdict]:
        """Each node: healthy, or what falls short of the built-in known-good figures."""
        from clusterbench.analysis.baseline import builtin_baseline
        from clusterbench.analysis.verdict import node_verdicts

        if not self.results.measurements and not self.results.findings:
            return []
        return node_verdicts(self.results, builtin_baseline())

    @cached_property
    def other_findings(self) -> str:
        """'across nodes: ...' where findings about no one node call for action; '' else."""
        from clusterbench.analysis.verdict import other_findings_line

        if not self.results.measurements and not self.results.findings:
            return ""
        return other_findings_line(self.results)

    @cached_property
    def drain(self) -> DrainList:
        """The drain list (judged only after node-pair tests among three or more nodes)."""
        from clusterbench.analysis.drain import drain_list

        return drain_list(self.one_round, self.thresholds)

    @cached_property
    def advice(self) -> list[Advice]:
        """What to change, best first, each with its evidence."""
        from clusterbench.analysis.advice import collect_advice

        return collect_advice(self.results)

    @cached_property
    def sections(self) -> list[Section]:
        """Each benchmark's section, then each run part's (:func:`registry.summary_sections`)."""
        from clusterbench import registry

        return registry.summary_sections(self.results, run_dir=self.run_dir)

    @cached_property
    def plots(self) -> Mapping[str, Sequence[Plot]]:
        """The report's plots (:func:`registry.report_plots`)."""
        from clusterbench import registry

        return registry.report_plots(self.results, base=self.base, run_dir=self.run_dir)
