"""The benchmark contract: one :class:`Benchmark` declaration names everything about a benchmark.

A declaration names the benchmark's level and scope, the suites it belongs to, its settings
class, its measurement function, the metrics it emits, its analysis (results and thresholds in,
findings out) and its summary section.  The rest of the code dispatches on it: the config takes
suites and settings from here, the rank loop runs ``run``, :func:`analyze` applies every
benchmark's ``findings``, :func:`summary_sections` builds every benchmark's ``section`` and
:func:`report_plots` draws every benchmark's ``figures`` for the HTML report.

The built-in benchmarks are declared in :mod:`clusterbench.catalog`; a benchmark of one's own is
its own modules plus one :func:`register` call (docs/architecture.md shows one).

Beside the benchmarks' parts, :func:`summary_sections` and :func:`report_plots` append the ones
that belong to no one benchmark: the run's scaling prediction (from training and collectives
together; :mod:`clusterbench.report.sections.prediction`), named ``prediction``, the training
partition search (its predictions need the collectives' links too), named ``training
partition``, where each rank ran (doctor's placement facts;
:mod:`clusterbench.report.sections.placement`), the run's cost (at the prices of the run
folder's cost.json; :mod:`clusterbench.report.sections.cost`), named ``cost``; and a soak's
rounds, named ``soak`` (:mod:`clusterbench.report.sections.soak`).  Of a soak, everything
else sees one round (:func:`clusterbench.schema.one_round`).
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from clusterbench.analysis import run_findings, soak_findings
from clusterbench.benchmarks.budget import BudgetModel
from clusterbench.benchmarks.presets import DeviceType, SuiteName
from clusterbench.metrics import MetricSet
from clusterbench.report.cells import Section, generic_section
from clusterbench.report.figures import cost as cost_figures
from clusterbench.report.figures import prediction as prediction_figures
from clusterbench.report.figures import soak as soak_figures
from clusterbench.report.figures import telemetry as telemetry_figures
from clusterbench.report.figures import training as training_figures
from clusterbench.report.plots import Plot, PlotContext
from clusterbench.report.sections import cost as cost_section
from clusterbench.report.sections import placement as placement_section
from clusterbench.report.sections import prediction as prediction_section
from clusterbench.report.sections import soak as soak_section
from clusterbench.report.sections import telemetry as telemetry_section
from clusterbench.report.sections import training as training_section
from clusterbench.schema import SEVERITY_ORDER, Finding, Measurement, Results, one_round
from clusterbench.thresholds import Thresholds, run_thresholds

if TYPE_CHECKING:  # measurements run under it; declaring them needs no torch
    from clusterbench.runtime.dist import DistContext

__all__ = [
    "Benchmark",
    "Scope",
    "all_benchmarks",
    "analyze",
    "get",
    "register",
    "report_plots",
    "suite_benchmarks",
    "summary_sections",
]

Scope = Literal["per_device", "collective", "workload"]
"""per_device: all ranks at once, one result per device (finds the bad GPU); collective: all ranks
together over several process groups; workload: training at several world sizes."""
RunFn = Callable[["DistContext", Any], Iterable[Measurement | Finding]]
"""``run(ctx, settings)`` yields measurements, and may yield findings of its own (doctor's)."""
FindingsFn = Callable[[Results, Thresholds], list[Finding]]
SectionFn = Callable[[list[Measurement], bool], Section]
"""``section(the benchmark's measurements, multi_host)`` -> its part of the summary."""
FiguresFn = Callable[[list[Measurement], PlotContext], list[Plot]]
"""``figures(the benchmark's measurements, context)`` -> its plots in the HTML report."""

ALL_SUITES: frozenset[SuiteName] = frozenset({"quick", "standard", "full"})
FROM_STANDARD: frozenset[SuiteName] = frozenset({"standard", "full"})


@dataclass(frozen=True, kw_only=True, slots=True)
class Benchmark:
    """Everything about one benchmark, in one place."""

    name: str
    level: int
    """0 self-test and doctor, 1 one node, 2 network, 3 training."""
    scope: Scope
    run: RunFn | str
    """The measurement, or where it lives as ``"package.module:function"``: imported only by
    the rank that runs it, so that everything else (the CLI, analysis, the report) never
    imports torch."""
    settings: type
    """The settings dataclass; its fields are what a TOML table or ``--set`` may change.  A
    ``preset(suite=, device_type=)`` classmethod, where present, gives each suite's values."""
    metrics: type[MetricSet]
    """Every metric ``run`` emits."""
    suites: frozenset[SuiteName] = frozenset()
    """Suites that run it (none: only when named with ``--only``)."""
    findings: FindingsFn | None = None
    section: SectionFn = generic_section
    figures: FiguresFn | None = None
    """Its plots in the HTML report (None: the report shows its tables only)."""
    devices: frozenset[DeviceType] = frozenset({"cuda", "cpu"})
    """Device types the benchmark has a form for."""
    settings_from: str | None = None
    """A benchmark whose settings this one shares (attribution profiles the training workload):
    a setting given to that one applies here too, unless given here itself."""
    budget: BudgetModel | None = None
    """Its cost model: the expected seconds of its settings on a node, and the cut steps that
    fit it into a time budget (None: no estimate; a budget then only stops it at its deadline
    where it checks ``ctx.budget``)."""
    description: str = field(default="")
    """One line for ``clusterbench list``; defaults to the first line of ``run``'s docstring
    (required where ``run`` is named by a string)."""

    def __post_init__(self) -> None:
        if self.metrics.benchmark != self.name:
            raise ValueError(
                f"benchmark {self.name!r} declares the metrics of {self.metrics.benchmark!r}"
            )
        if isinstance(self.run, str):
            module, _, function = self.run.partition(":")
            if not module or not function:
                raise ValueError(
                    f"benchmark {self.name!r}: run {self.run!r} is not 'module:function'"
                )
            if not self.description:
                raise ValueError(
                    f"benchmark {self.name!r} names its run by a string: give a description"
                )
        elif not self.description:
            lines = (self.run.__doc__ or "").strip().splitlines()
            object.__setattr__(self, "description", lines[0] if lines else self.name)

    @property
    def module(self) -> str:
        """The module that holds the measurement (a worker imports it to register the benchmark
        where it is not built in)."""
        return self.run.partition(":")[0] if isinstance(self.run, str) else self.run.__module__

    def measure(self) -> RunFn:
        """The measurement function (imported now where ``run`` names it)."""
        if not isinstance(self.run, str):
            return self.run
        module, _, function = self.run.partition(":")
        fn: RunFn = getattr(importlib.import_module(module), function)
        return fn

    def supports(self, device_type: str) -> bool:
        return device_type in self.devices

    def preset(self, *, suite: str, device_type: str) -> Any:
        """The settings this benchmark runs with in ``suite`` on ``device_type``."""
        preset = getattr(self.settings, "preset", None)
        if callable(preset):
            return preset(suite=suite, device_type=device_type)
        return self.settings()


_REGISTRY: dict[str, Benchmark] = {}
"""Name -> declaration, in registration order, which is the order a suite runs them in."""


def register(benchmark: Benchmark) -> Benchmark:
    """Add a benchmark; the same declaration twice is allowed, another under a taken name not."""
    held = _REGISTRY.get(benchmark.name)
    if held is not None and held != benchmark:
        raise ValueError(f"benchmark {benchmark.name!r} registered twice")
    _REGISTRY[benchmark.name] = benchmark
    return benchmark


def get(name: str) -> Benchmark:
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(_REGISTRY)
        raise ValueError(f"unknown benchmark {name!r} (known: {known})") from None


def all_benchmarks() -> list[Benchmark]:
    """Every registered benchmark, in run order."""
    return list(_REGISTRY.values())


def suite_benchmarks(suite: str) -> list[str]:
    """The benchmarks ``suite`` runs, in run order."""
    return [b.name for b in _REGISTRY.values() if suite in b.suites]


def analyze(results: Results, thresholds: Thresholds) -> list[Finding]:
    """Every benchmark's findings, then the run-wide ones (peer outliers, NCCL's log, the host
    inventory); fail first, then warn, then info (stable within a severity).  A soak's
    benchmarks and run-wide findings judge one round (:func:`~clusterbench.schema.one_round`:
    the last complete one), its drift findings every round."""
    one = one_round(results)
    findings = [
        finding
        for benchmark in _REGISTRY.values()
        if benchmark.findings is not None
        for finding in benchmark.findings(one, thresholds)
    ]
    findings += run_findings(one, thresholds)
    findings += soak_findings.findings(results, thresholds)
    return sorted(findings, key=lambda f: SEVERITY_ORDER[f.severity])


def _by_benchmark(results: Results) -> dict[str, list[Measurement]]:
    """Each benchmark's measurements, benchmarks in the order the run measured them."""
    by_benchmark: dict[str, list[Measurement]] = defaultdict(list)
    for m in results.measurements:
        by_benchmark[m.benchmark].append(m)
    return by_benchmark


def _multi_host(results: Results) -> bool:
    return len({m.host for m in results.measurements}) > 1


def summary_sections(results: Results, *, run_dir: Path | None = None) -> list[Section]:
    """One section per benchmark, in the order the run measured them; then the run-wide ones:
    the prediction's (when training and collectives both ran) and the placement table (when
    doctor recorded where the ranks ran), the cost (when training ran: at the prices of
    ``run_dir``'s cost.json, else the flags that price it); last, a soak's rounds.  A soak's
    benchmark sections show one round (:func:`~clusterbench.schema.one_round`), its own
    section every round."""
    one = one_round(results)
    by_benchmark = _by_benchmark(one)
    multi_host = _multi_host(one)
    sections = []
    for name, ms in by_benchmark.items():
        held = _REGISTRY.get(name)
        section = (held.section if held is not None else generic_section)(ms, multi_host)
        section.benchmark = name
        sections.append(section)
    derived = [make(one) for make in _RUN_SECTIONS] + [cost_section.section(one, run_dir)]
    derived.append(soak_section.section(results))
    return sections + [d for d in derived if d is not None]


_RUN_SECTIONS: tuple[Callable[[Results], Section | None], ...] = (
    prediction_section.section,
    training_section.partition_section,
    placement_section.section,
    telemetry_section.section,
)
"""Sections of the run as a whole, after the benchmarks' (None: nothing to show)."""


def _drawn(name: str, draw: Callable[..., Iterable[Plot]], *args: Any) -> list[Plot]:
    """``draw(*args)``'s plots; one that raises gets one plot with no data whose note says what
    went wrong (the page shows such a plot as that line alone)."""
    try:
        return list(draw(*args))
    except Exception as exc:  # one benchmark's drawing must not lose the whole report
        reason = " ".join(str(exc).split())[:300] or "no message"
        note = f"the plots of {name} could not be drawn: {type(exc).__name__}: {reason}"
        return [Plot(title=f"{name}: plots not drawn", figure={}, notes=[note])]


def report_plots(
    results: Results, *, base: Results | None = None, run_dir: Path | None = None
) -> dict[str, list[Plot]]:
    """Each benchmark's plots for the HTML report (benchmarks without ``figures`` left out).

    ``base``: the base run of a comparison, whose measurements of the same benchmark each
    ``figures`` gets in :attr:`PlotContext.base`.  A ``figures`` that raises costs its benchmark
    its plots, not the report: it gets one plot with no data whose note says what went wrong
    (the page shows such a plot as that line alone).  The prediction's plots come last, under
    ``prediction``, then a soak's figures over the rounds, under ``soak`` (the benchmarks'
    plots of a soak draw one round, as their sections do).  ``run_dir``: the run folder, whose
    telemetry series each benchmark's telemetry figure draws (after its own plots) and whose
    cost.json prices the run (the ``cost`` plots, before a soak's).
    """
    full, results = results, one_round(results)
    base_by_benchmark = _by_benchmark(one_round(base)) if base is not None else None
    multi_host = _multi_host(results)
    thresholds = run_thresholds(results)
    plots: dict[str, list[Plot]] = {}
    for name, ms in _by_benchmark(results).items():
        held = _REGISTRY.get(name)
        if held is None or held.figures is None:
            continue
        ctx = PlotContext(
            multi_host=multi_host,
            thresholds=thresholds,
            base=None if base_by_benchmark is None else base_by_benchmark.get(name, []),
        )
        plots[name] = _drawn(name, held.figures, ms, ctx)
    for name in telemetry_figures.benchmarks_with_telemetry(full):
        drawn = _drawn(name, telemetry_figures.figures, full, name, run_dir)
        plots[name] = plots.get(name, []) + drawn
    predicted = _drawn(prediction_section.NAME, prediction_figures.figures, results)
    if predicted:
        plots[prediction_section.NAME] = predicted
    partition = _drawn(training_section.PARTITION, training_figures.partition_figures, results)
    if partition:
        plots[training_section.PARTITION] = partition
    cost = _drawn(cost_section.NAME, cost_figures.figures, results, run_dir)
    if cost:
        plots[cost_section.NAME] = cost
    soak = _drawn(soak_section.NAME, soak_figures.figures, full)
    if soak:
        plots[soak_section.NAME] = soak
    return plots
