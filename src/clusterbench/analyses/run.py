"""One analysis per run: the run's results and everything derived from them, each computed
once, on first use, and read by every page of the run (the console, summary.md, report.html)
and by its exports."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterbench import registry
from clusterbench.schema import SEVERITY_ORDER, Finding, Measurement, Results, one_round
from clusterbench.thresholds import Thresholds, run_thresholds

if TYPE_CHECKING:
    from clusterbench.analyses.compare.comparison import Comparison
    from clusterbench.analyses.cost.table import CostTable
    from clusterbench.analyses.drain.drain_list import DrainList
    from clusterbench.analyses.prediction.predict import Prediction
    from clusterbench.analyses.verdict.nodes import NodeVerdict
    from clusterbench.judging.advice import Advice
    from clusterbench.views.cells import Section
    from clusterbench.views.plots import Plot

__all__ = ["RunAnalysis", "analyze", "report_plots", "summary_sections"]


@dataclass(eq=False)
class RunAnalysis:
    """A run as its pages show it.  ``results`` hold the findings (``finish`` analyses them
    once, before anything is rendered); the rest is derived from them on first use and kept.

    ``comparison``: the run against a baseline or an earlier run (``run --baseline``,
    ``report --compare``); ``base``: that earlier run, whose measurements the plots draw beside
    this run's; ``run_dir``: the run folder (the telemetry series, the prices of cost.json).
    A derived part may be given instead of computed by assigning it (``run.plots = {...}``).
    Each run part's own analysis is computed once, on first use, and kept (:meth:`part`).
    """

    results: Results
    run_dir: Path | None = None
    comparison: Comparison | None = None
    base: Results | None = None
    thresholds: Thresholds = None  # type: ignore[assignment]  # set in __post_init__
    """The limits the run is judged by (default: the run's own, from its configuration)."""
    _parts: dict[str, object] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.thresholds is None:
            self.thresholds = run_thresholds(self.results)

    def part(self, name: str) -> Any:
        """The run part ``name``'s analysis of the run (its ``compute``), made on first use and
        kept: its findings, section and figures all read this one.  It is computed from what
        the part is given, as they are: every round of a soak for an ``every_round`` part, one
        round (:attr:`one_round`) for the others."""
        if name not in self._parts:
            part = registry.get_run_part(name)
            if part.compute is None:
                raise ValueError(f"run part {name!r} computes nothing")
            seen = self.results if part.every_round else self.one_round
            self._parts[name] = registry.resolve(part.compute)(seen, self)
        return self._parts[name]

    @property
    def prediction(self) -> Prediction | str | None:
        """The run's scaling prediction at the default GPU counts and its target efficiency
        (what its findings, section and figures show); the reason when none can be made; None
        when it does not apply (training or collectives did not run).  The prediction run
        part's analysis (:meth:`part`), which the partition search reads too."""
        prediction: Prediction | str | None = self.part("prediction")
        return prediction

    @property
    def one_round(self) -> Results:
        """The round the benchmarks' verdicts, sections and plots show (the whole run unless a
        soak).  Taken anew at each use: a soak's round is a copy, and the findings the finish
        adds after the analysis must be in it."""
        return one_round(self.results)

    def add_comparison(self, comparison: Comparison) -> None:
        """The run against a baseline or an earlier run: its regressions join the findings."""
        self.comparison = comparison
        self.results.findings = [*self.results.findings, *comparison.findings]

    @property
    def cost(self) -> CostTable | str | None:
        """The run's cost at the prices of its folder's cost.json (unpriced without one), what
        its section and figures show; None where it has no training throughput to price; the
        reason where it could not be computed.  The cost run part's analysis (:meth:`part`)."""
        cost: CostTable | str | None = self.part("cost")
        return cost

    @cached_property
    def node_verdicts(self) -> list[NodeVerdict]:
        """Each node: healthy, or what falls short of the built-in known-good figures."""
        from clusterbench.analyses.baseline import builtin_baseline
        from clusterbench.analyses.verdict.nodes import node_verdicts

        if not self.results.measurements and not self.results.findings:
            return []
        return node_verdicts(self.results, builtin_baseline())

    @cached_property
    def other_findings(self) -> str:
        """'across nodes: ...' where findings about no one node call for action; '' else."""
        from clusterbench.analyses.verdict.nodes import other_findings_line

        if not self.results.measurements and not self.results.findings:
            return ""
        return other_findings_line(self.results)

    @cached_property
    def drain(self) -> DrainList:
        """The drain list (judged only after node-pair tests among three or more nodes)."""
        from clusterbench.analyses.drain.drain_list import drain_list

        return drain_list(self.one_round, self.thresholds)

    @cached_property
    def advice(self) -> list[Advice]:
        """What to change, best first, each with its evidence."""
        from clusterbench.judging.advice import collect_advice

        return collect_advice(self.results)

    @cached_property
    def sections(self) -> list[Section]:
        """Each benchmark's section, then each run part's (:func:`summary_sections`)."""
        return summary_sections(self)

    @cached_property
    def plots(self) -> Mapping[str, Sequence[Plot]]:
        """The report's plots (:func:`report_plots`)."""
        return report_plots(self)


# ----------------------------------------------------------------------------- dispatch


def analyze(run: RunAnalysis | Results, thresholds: Thresholds | None = None) -> list[Finding]:
    """Every benchmark's findings, then every run part's (peer outliers, NCCL's log, the host
    inventory, ...); fail first, then warn, then info (stable within a severity).  A soak's
    benchmarks and run parts judge one round (:func:`~clusterbench.schema.one_round`: the last
    complete one), its drift findings every round.  ``run``: the run's analysis (or its
    results, judged by ``thresholds``, default the run's own)."""
    run = _as_run(run, thresholds=thresholds)
    one = run.one_round
    findings = []
    for benchmark in registry.all_benchmarks():
        verdicts = benchmark.verdicts()
        if verdicts is not None:
            findings += verdicts(one, run.thresholds)
    for part in registry.run_parts():
        if part.findings is not None:
            findings += registry.resolve(part.findings)(
                run.results if part.every_round else one, run
            )
    return sorted(findings, key=lambda f: SEVERITY_ORDER[f.severity])


def _as_run(
    run: RunAnalysis | Results,
    *,
    thresholds: Thresholds | None = None,
    run_dir: Path | None = None,
    base: Results | None = None,
) -> RunAnalysis:
    """``run`` itself, or results wrapped in a :class:`RunAnalysis` of their own."""
    if isinstance(run, RunAnalysis):
        return run
    made = RunAnalysis(run, run_dir=run_dir, base=base)
    if thresholds is not None:
        made.thresholds = thresholds
    return made


def _by_benchmark(results: Results) -> dict[str, list[Measurement]]:
    """Each benchmark's measurements, benchmarks in the order the run measured them."""
    by_benchmark: dict[str, list[Measurement]] = defaultdict(list)
    for m in results.measurements:
        by_benchmark[m.benchmark].append(m)
    return by_benchmark


def _multi_host(results: Results) -> bool:
    return len({m.host for m in results.measurements}) > 1


def summary_sections(run: RunAnalysis | Results, *, run_dir: Path | None = None) -> list[Section]:
    """One section per benchmark, in the order the run measured them; then each run part's
    that has something to show (the prediction's when training and collectives both ran, the
    placement table when doctor recorded where the ranks ran, the cost at the prices of
    the run folder's cost.json, ...).  A soak's benchmark sections show one round
    (:func:`~clusterbench.schema.one_round`), its own section every round.  ``run``: the run's
    analysis (or its results, in the folder ``run_dir``)."""
    run = _as_run(run, run_dir=run_dir)
    one = run.one_round
    by_benchmark = _by_benchmark(one)
    multi_host = _multi_host(one)
    sections = []
    for name, ms in by_benchmark.items():
        held = registry.find(name)
        section = (
            held.summary() if held is not None else registry.resolve(registry.GENERIC_SECTION)
        )(ms, multi_host)
        section.benchmark = name
        sections.append(section)
    for part in registry.run_parts():
        if part.section is not None:
            made = registry.resolve(part.section)(run.results if part.every_round else one, run)
            if made is not None:
                sections.append(made)
    return sections


def _draw_or_say_why(name: str, draw: Callable[..., Iterable[Plot]], *args: Any) -> list[Plot]:
    """``draw(*args)``'s plots; one that raises gets one plot with no data whose note says what
    went wrong (the page shows such a plot as that line alone)."""
    try:
        return list(draw(*args))
    except Exception as exc:  # one benchmark's drawing must not lose the whole report
        return _plot_saying_why(name, exc)


def _plot_saying_why(name: str, exc: Exception) -> list[Plot]:
    from clusterbench.views.plots import Plot

    reason = " ".join(str(exc).split())[:300] or "no message"
    note = f"the plots of {name} could not be drawn: {type(exc).__name__}: {reason}"
    return [Plot(title=f"{name}: plots not drawn", figure={}, notes=[note])]


def report_plots(
    run: RunAnalysis | Results, *, base: Results | None = None, run_dir: Path | None = None
) -> dict[str, list[Plot]]:
    """Each benchmark's plots for the HTML report (benchmarks without ``figures`` left out),
    then each run part's.

    ``run``: the run's analysis (or its results, in the folder ``run_dir``, compared with
    ``base``).  The base run of a comparison gives each ``figures`` its measurements of the
    same benchmark in :attr:`PlotContext.base`.  A ``figures`` that raises costs its benchmark
    its plots, not the report: it gets one plot with no data whose note says what went wrong
    (the page shows such a plot as that line alone).  A run part's plots come under its name,
    or, where it gives a mapping, after each named benchmark's own (the telemetry series).
    The benchmarks' plots of a soak draw one round, as their sections do.
    """
    from clusterbench.views.plots import PlotContext

    run = _as_run(run, run_dir=run_dir, base=base)
    results = run.one_round
    base_by_benchmark = _by_benchmark(one_round(run.base)) if run.base is not None else None
    multi_host = _multi_host(results)
    plots: dict[str, list[Plot]] = {}
    for name, ms in _by_benchmark(results).items():
        held = registry.find(name)
        draw = held.plots() if held is not None else None
        if draw is None:
            continue
        ctx = PlotContext(
            multi_host=multi_host,
            thresholds=run.thresholds,
            base=None if base_by_benchmark is None else base_by_benchmark.get(name, []),
        )
        plots[name] = _draw_or_say_why(name, draw, ms, ctx)
    for part in registry.run_parts():
        if part.figures is None:
            continue
        seen = run.results if part.every_round else results
        drawn = _draw_run_part(part.name, registry.resolve(part.figures), seen, run)
        if isinstance(drawn, list):
            if drawn:
                plots[part.name] = drawn
            continue
        for name, more in drawn.items():
            plots[name] = plots.get(name, []) + more
    return plots


def _draw_run_part(
    name: str, draw: registry.RunFiguresFn, results: Results, run: RunAnalysis
) -> list[Plot] | Mapping[str, list[Plot]]:
    """A run part's plots, as :func:`_draw_or_say_why` guards a benchmark's."""
    try:
        drawn = draw(results, run)
    except Exception as exc:  # one part's drawing must not lose the whole report
        return _plot_saying_why(name, exc)
    return drawn if isinstance(drawn, Mapping) else list(drawn)
