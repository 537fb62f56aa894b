"""The benchmark contract: one :class:`Benchmark` declaration names everything about a benchmark,
and one :class:`RunPart` declaration each analysis of the run as a whole.

A benchmark's folder (``benchmarks/<name>/``) declares it in its ``__init__``: its level and
scope, the suites it belongs to, its settings class, the metrics it emits, its cost model, and
where its parts live, as ``"package.module:function"``: the measurement (``run``), its verdicts
(``findings``: results and thresholds in, findings out), its summary section and its figures.
A part is imported when it is first used, so that what does not measure (the CLI, ``list``,
analysis, the report) never imports torch, and a command loads only the parts it calls.  The
rest of the code dispatches on the declarations: the config takes suites and settings from
here, the rank loop runs ``run``, :func:`analyze` applies every benchmark's ``findings`` then
every run part's, :func:`summary_sections` builds every benchmark's ``section`` then every run
part's, and :func:`report_plots` draws every ``figures``.

The catalog (:mod:`clusterbench.catalog`) lists the built-in ones; a benchmark of one's own is
its own modules plus one :func:`register` call (docs/architecture.md shows one).

The run parts belong to no one benchmark: the host inventory, NCCL's own log, the scaling
prediction (from training and collectives together), the training partition search (its
predictions need the collectives' links too), where each rank ran, the GPUs' telemetry, how
the run fitted its time budget, each device against its peers, the run's cost (at the prices
of the run folder's cost.json) and a soak's rounds.  Of a soak, everything but the soak part
sees one round (:func:`clusterbench.schema.one_round`).
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from clusterbench.benchmarks.budget import BudgetModel
from clusterbench.benchmarks.presets import DeviceType, SuiteName
from clusterbench.metrics import MetricSet

if TYPE_CHECKING:
    from clusterbench.runtime.dist import DistContext
    from clusterbench.schema import Finding, Measurement, Results
    from clusterbench.thresholds import Thresholds
    from clusterbench.views.cells import Section
    from clusterbench.views.plots import Plot, PlotContext

__all__ = [
    "Benchmark",
    "RunPart",
    "Scope",
    "all_benchmarks",
    "analyze",
    "get",
    "register",
    "register_run_part",
    "report_plots",
    "run_parts",
    "suite_benchmarks",
    "summary_sections",
]

Scope = Literal["per_device", "collective", "workload"]
"""per_device: all ranks at once, one result per device (finds the bad GPU); collective: all ranks
together over several process groups; workload: training at several world sizes."""
RunFn: TypeAlias = "Callable[[DistContext, Any], Iterable[Measurement | Finding]]"
"""``run(ctx, settings)`` yields measurements, and may yield findings of its own (doctor's)."""
FindingsFn: TypeAlias = "Callable[[Results, Thresholds], list[Finding]]"
SectionFn: TypeAlias = "Callable[[list[Measurement], bool], Section]"
"""``section(the benchmark's measurements, multi_host)`` -> its part of the summary."""
FiguresFn: TypeAlias = "Callable[[list[Measurement], PlotContext], list[Plot]]"
"""``figures(the benchmark's measurements, context)`` -> its plots in the HTML report."""
RunSectionFn: TypeAlias = "Callable[[Results, Path | None], Section | None]"
"""``section(results, run folder)`` -> a run part's section (None: nothing to show)."""
RunFiguresFn: TypeAlias = "Callable[[Results, Path | None], list[Plot] | Mapping[str, list[Plot]]]"
"""``figures(results, run folder)`` -> a run part's plots, or plots to add to benchmarks'."""
GENERIC_SECTION = "clusterbench.views.cells:generic_section"
"""The section of a benchmark that names none: its metrics in a table."""


def resolve(ref: Any) -> Any:
    """A part named ``"package.module:attribute"``, imported now; anything else as it is."""
    if not isinstance(ref, str):
        return ref
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _check_ref(owner: str, what: str, ref: object) -> None:
    if isinstance(ref, str):
        module, _, attribute = ref.partition(":")
        if not module or not attribute:
            raise ValueError(f"{owner}: {what} {ref!r} is not 'module:function'")


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
    findings: FindingsFn | str | None = None
    """Its verdicts (None: it has none of its own)."""
    section: SectionFn | str = GENERIC_SECTION
    """Its part of the summary."""
    figures: FiguresFn | str | None = None
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
        for what in ("run", "findings", "section", "figures"):
            _check_ref(f"benchmark {self.name!r}", what, getattr(self, what))
        if isinstance(self.run, str):
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
        fn: RunFn = resolve(self.run)
        return fn

    def verdicts(self) -> FindingsFn | None:
        """The findings function (imported now where ``findings`` names it)."""
        fn: FindingsFn | None = resolve(self.findings)
        return fn

    def summary(self) -> SectionFn:
        """The section function (imported now where ``section`` names it)."""
        fn: SectionFn = resolve(self.section)
        return fn

    def plots(self) -> FiguresFn | None:
        """The figures function (imported now where ``figures`` names it)."""
        fn: FiguresFn | None = resolve(self.figures)
        return fn

    def supports(self, device_type: str) -> bool:
        return device_type in self.devices

    def preset(self, *, suite: str, device_type: str) -> Any:
        """The settings this benchmark runs with in ``suite`` on ``device_type``."""
        preset = getattr(self.settings, "preset", None)
        if callable(preset):
            return preset(suite=suite, device_type=device_type)
        return self.settings()


@dataclass(frozen=True, kw_only=True, slots=True)
class RunPart:
    """An analysis of the run as a whole: its findings, summary section and figures, each as
    ``"package.module:function"`` (or the function), any of them absent."""

    name: str
    """Its section's and figures' name in the summary and the report."""
    findings: FindingsFn | str | None = None
    """``findings(results, thresholds)``."""
    section: RunSectionFn | str | None = None
    """``section(results, run folder)``: None when there is nothing to show."""
    figures: RunFiguresFn | str | None = None
    """``figures(results, run folder)``: its plots, or a mapping benchmark -> plots to add
    after that benchmark's own (the telemetry series of each benchmark)."""
    every_round: bool = False
    """A soak's parts see every round; the others one (:func:`~clusterbench.schema.one_round`)."""

    def __post_init__(self) -> None:
        for what in ("findings", "section", "figures"):
            _check_ref(f"run part {self.name!r}", what, getattr(self, what))


_REGISTRY: dict[str, Benchmark] = {}
"""Name -> declaration, in registration order, which is the order a suite runs them in."""


_BUILTIN_LOADED = False


def _builtin() -> None:
    """Register the catalog's benchmarks and run parts, once, before anything else is looked up
    or registered (so that they come first, in the catalog's order)."""
    global _BUILTIN_LOADED
    if not _BUILTIN_LOADED:
        _BUILTIN_LOADED = True
        importlib.import_module("clusterbench.catalog").register_builtin()


def register(benchmark: Benchmark) -> Benchmark:
    """Add a benchmark; the same declaration twice is allowed, another under a taken name not."""
    _builtin()
    held = _REGISTRY.get(benchmark.name)
    if held is not None and held != benchmark:
        raise ValueError(f"benchmark {benchmark.name!r} registered twice")
    _REGISTRY[benchmark.name] = benchmark
    return benchmark


_RUN_PARTS: dict[str, RunPart] = {}
"""Name -> declaration, in registration order: the order of their findings, sections and plots."""


def register_run_part(part: RunPart) -> RunPart:
    """Add a run part; the same declaration twice is allowed, another under a taken name not."""
    _builtin()
    held = _RUN_PARTS.get(part.name)
    if held is not None and held != part:
        raise ValueError(f"run part {part.name!r} registered twice")
    _RUN_PARTS[part.name] = part
    return part


def run_parts() -> list[RunPart]:
    """Every registered run part, in order."""
    _builtin()
    return list(_RUN_PARTS.values())


def get(name: str) -> Benchmark:
    _builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(_REGISTRY)
        raise ValueError(f"unknown benchmark {name!r} (known: {known})") from None


def all_benchmarks() -> list[Benchmark]:
    """Every registered benchmark, in run order."""
    _builtin()
    return list(_REGISTRY.values())


def suite_benchmarks(suite: str) -> list[str]:
    """The benchmarks ``suite`` runs, in run order."""
    _builtin()
    return [b.name for b in _REGISTRY.values() if suite in b.suites]


def analyze(results: Results, thresholds: Thresholds) -> list[Finding]:
    """Every benchmark's findings, then every run part's (peer outliers, NCCL's log, the host
    inventory, ...); fail first, then warn, then info (stable within a severity).  A soak's
    benchmarks and run parts judge one round (:func:`~clusterbench.schema.one_round`: the last
    complete one), its drift findings every round."""
    from clusterbench.schema import SEVERITY_ORDER, one_round

    _builtin()
    one = one_round(results)
    findings = []
    for benchmark in _REGISTRY.values():
        verdicts = benchmark.verdicts()
        if verdicts is not None:
            findings += verdicts(one, thresholds)
    for part in _RUN_PARTS.values():
        if part.findings is not None:
            findings += resolve(part.findings)(results if part.every_round else one, thresholds)
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
    """One section per benchmark, in the order the run measured them; then each run part's
    that has something to show (the prediction's when training and collectives both ran, the
    placement table when doctor recorded where the ranks ran, the cost at the prices of
    ``run_dir``'s cost.json, ...).  A soak's benchmark sections show one round
    (:func:`~clusterbench.schema.one_round`), its own section every round."""
    from clusterbench.schema import one_round

    _builtin()
    one = one_round(results)
    by_benchmark = _by_benchmark(one)
    multi_host = _multi_host(one)
    sections = []
    for name, ms in by_benchmark.items():
        held = _REGISTRY.get(name)
        section = (held.summary() if held is not None else resolve(GENERIC_SECTION))(ms, multi_host)
        section.benchmark = name
        sections.append(section)
    for part in _RUN_PARTS.values():
        if part.section is not None:
            made = resolve(part.section)(results if part.every_round else one, run_dir)
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
    results: Results, *, base: Results | None = None, run_dir: Path | None = None
) -> dict[str, list[Plot]]:
    """Each benchmark's plots for the HTML report (benchmarks without ``figures`` left out),
    then each run part's.

    ``base``: the base run of a comparison, whose measurements of the same benchmark each
    ``figures`` gets in :attr:`PlotContext.base`.  A ``figures`` that raises costs its benchmark
    its plots, not the report: it gets one plot with no data whose note says what went wrong
    (the page shows such a plot as that line alone).  A run part's plots come under its name,
    or, where it gives a mapping, after each named benchmark's own (the telemetry series).
    The benchmarks' plots of a soak draw one round, as their sections do.  ``run_dir``: the run
    folder (the telemetry series, the prices in cost.json).
    """
    from clusterbench.schema import one_round
    from clusterbench.thresholds import run_thresholds
    from clusterbench.views.plots import PlotContext

    _builtin()
    full, results = results, one_round(results)
    base_by_benchmark = _by_benchmark(one_round(base)) if base is not None else None
    multi_host = _multi_host(results)
    thresholds = run_thresholds(results)
    plots: dict[str, list[Plot]] = {}
    for name, ms in _by_benchmark(results).items():
        held = _REGISTRY.get(name)
        draw = held.plots() if held is not None else None
        if draw is None:
            continue
        ctx = PlotContext(
            multi_host=multi_host,
            thresholds=thresholds,
            base=None if base_by_benchmark is None else base_by_benchmark.get(name, []),
        )
        plots[name] = _draw_or_say_why(name, draw, ms, ctx)
    for part in _RUN_PARTS.values():
        if part.figures is None:
            continue
        seen = full if part.every_round else results
        drawn = _draw_run_part(part.name, resolve(part.figures), seen, run_dir)
        if isinstance(drawn, list):
            if drawn:
                plots[part.name] = drawn
            continue
        for name, more in drawn.items():
            plots[name] = plots.get(name, []) + more
    return plots


def _draw_run_part(
    name: str, draw: RunFiguresFn, results: Results, run_dir: Path | None
) -> list[Plot] | Mapping[str, list[Plot]]:
    """A run part's plots, as :func:`_drawn` guards a benchmark's."""
    try:
        drawn = draw(results, run_dir)
    except Exception as exc:  # one part's drawing must not lose the whole report
        return _plot_saying_why(name, exc)
    return drawn if isinstance(drawn, Mapping) else list(drawn)
