"""The benchmark contract: one :class:`Benchmark` declaration names everything about a benchmark,
and one :class:`RunPart` declaration each analysis of the run as a whole.

A benchmark's folder (``benchmarks/<name>/``) declares it in its ``__init__``: its level and
scope, the suites it belongs to, its settings class, the metrics it emits, its duration model, and
where its parts live, as ``"package.module:function"``: the measurement (``run``), its verdicts
(``findings``: results and thresholds in, findings out), its summary section and its figures.
A part is imported when it is first used, so that what does not measure (the CLI, ``list``,
analysis, the report) never imports torch, and a command loads only the parts it calls.  The
rest of the code dispatches on the declarations: the config takes suites and settings from
here, the rank loop runs ``run``, :func:`analyze` applies every benchmark's ``findings`` then
every run part's, :func:`summary_sections` builds every benchmark's ``section`` then every run
part's, and :func:`report_plots` draws every ``figures``.

The catalog (:mod:`clusterbench.catalog`) lists the built-in ones, and the entry points above
it (the command line, the run pipeline) register them before anything looks one up: this module
sits below every benchmark and never imports the catalog.  A benchmark of one's own is its own
modules plus one :func:`register` call (docs/architecture.md shows one).

The run parts belong to no one benchmark: the host inventory, NCCL's own log, the scaling
prediction (from training and collectives together), the training partition search (its
predictions need the collectives' links too), where each rank ran, the GPUs' telemetry, how
the run fitted its time budget, each device against its peers, the run's cost (at the prices
of the run folder's cost.json) and a soak's rounds.  Of a soak, everything but the soak part
sees one round (:func:`clusterbench.schema.one_round`).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from clusterbench.durations import DurationModel
from clusterbench.metrics import Metric, MetricSet
from clusterbench.rules import PeerRules, VerdictLabel, params_of
from clusterbench.suites import DeviceType, SuiteName
from clusterbench.thresholds import Thresholds

if TYPE_CHECKING:
    from clusterbench.runtime.dist import DistContext
    from clusterbench.schema import Finding, Measurement, Results
    from clusterbench.views.cells import Section
    from clusterbench.views.plots import Plot, PlotContext

__all__ = [
    "Benchmark",
    "RunPart",
    "Scope",
    "all_benchmarks",
    "find",
    "get",
    "get_run_part",
    "register",
    "register_run_part",
    "run_parts",
    "suite_benchmarks",
    "threshold_keys",
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
RunComputeFn: TypeAlias = "Callable[[Results, Any], object]"
"""``compute(results, run)`` -> a run part's analysis of the run, which its findings, section and
figures read (:meth:`clusterbench.analyses.run.RunAnalysis.part`) instead of computing again."""
RunFindingsFn: TypeAlias = "Callable[[Results, Any], list[Finding]]"
"""``findings(results, run)`` -> a run part's findings: ``results`` the round(s) it judges,
``run`` the run's one analysis, a :class:`clusterbench.analyses.run.RunAnalysis` (its
thresholds, its prediction, its folder; named, not imported: the analysis reads the registry)."""
RunSectionFn: TypeAlias = "Callable[[Results, Any], Section | None]"
"""``section(results, run)`` -> a run part's section (None: nothing to show)."""
RunFiguresFn: TypeAlias = "Callable[[Results, Any], list[Plot] | Mapping[str, list[Plot]]]"
"""``figures(results, run)`` -> a run part's plots, or plots to add to benchmarks'."""
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
    durations: DurationModel | None = None
    """Its duration model: the expected seconds of its settings on a node, and the cut steps that
    fit it into a time budget (None: no estimate; a budget then only stops it at its deadline
    where it checks ``ctx.budget``)."""
    winner_params: Mapping[Metric, frozenset[str]] = field(default_factory=dict)
    """Params of a metric that name the case that won rather than what was measured (the best
    shape of a sweep): its figure is one whatever case reaches it, so comparisons, baselines
    and peers match its figures without them."""
    thresholds: type | None = None
    """Its own limits: a frozen dataclass whose fields are keys of the ``[thresholds]`` table
    (``--set thresholds.KEY=VALUE``), each with its default and a docstring; its findings read
    them with ``thresholds.of(XThresholds)`` (None: it has none).  Keys are unique over all
    benchmarks and the run-wide :class:`~clusterbench.thresholds.Thresholds`."""
    peers: PeerRules = field(default_factory=PeerRules)
    """How the peer comparison of the run treats its figures (each device against its peers)."""
    nccl_log: str | None = None
    """Its tuning hook: a boolean setting that, when on, has every rank keep NCCL's INFO log in
    the run folder (a tuning sweep proves from that log that a setting took effect)."""
    verdict_labels: tuple[VerdictLabel, ...] = ()
    """Its figures in a node's verdict line, each held against the known-good figure of the
    node's GPU model (none: its figures are not in the line)."""
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
        if self.nccl_log is not None and self.nccl_log not in {
            f.name for f in dataclasses.fields(self.settings)
        }:
            raise ValueError(f"benchmark {self.name!r}: nccl_log {self.nccl_log!r} is no setting")
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

    def winners(self, metric: str) -> frozenset[str]:
        """The params of ``metric`` that name a winning case (:attr:`winner_params`)."""
        return params_of(self.winner_params, self.name, metric)

    def placement(self, metric: str) -> frozenset[str]:
        """The params of ``metric`` that say where, not what (``peers.placement_params``)."""
        return params_of(self.peers.placement_params, self.name, metric)

    def wants_nccl_log(self, settings: Any) -> bool:
        """Whether these settings of it need NCCL's INFO log (:attr:`nccl_log`)."""
        return self.nccl_log is not None and bool(getattr(settings, self.nccl_log, False))

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
    """An analysis of the run as a whole: what it computes of the run (once), its findings,
    summary section and figures, each as ``"package.module:function"`` (or the function), any
    of them absent."""

    name: str
    """Its section's and figures' name in the summary and the report."""
    compute: RunComputeFn | str | None = None
    """``compute(results, run)``: the part's analysis, made once per run and kept by the run's
    one analysis (``run.part(name)``), where its findings, section and figures read it."""
    findings: RunFindingsFn | str | None = None
    """``findings(results, run)``."""
    section: RunSectionFn | str | None = None
    """``section(results, run)``: None when there is nothing to show."""
    figures: RunFiguresFn | str | None = None
    """``figures(results, run)``: its plots, or a mapping benchmark -> plots to add after
    that benchmark's own (the telemetry series of each benchmark)."""
    every_round: bool = False
    """A soak's parts see every round; the others one (:func:`~clusterbench.schema.one_round`)."""

    def __post_init__(self) -> None:
        for what in ("compute", "findings", "section", "figures"):
            _check_ref(f"run part {self.name!r}", what, getattr(self, what))


_REGISTRY: dict[str, Benchmark] = {}
"""Name -> declaration, in registration order, which is the order a suite runs them in."""


def register(benchmark: Benchmark) -> Benchmark:
    """Add a benchmark; the same declaration twice is allowed, another under a taken name not."""
    held = _REGISTRY.get(benchmark.name)
    if held is not None and held != benchmark:
        raise ValueError(f"benchmark {benchmark.name!r} registered twice")
    _check_threshold_keys(benchmark)
    _REGISTRY[benchmark.name] = benchmark
    return benchmark


def threshold_keys() -> dict[str, type]:
    """Every key of the ``[thresholds]`` table that a registered benchmark declares -> the
    limits class that declares it."""
    return {
        f.name: b.thresholds
        for b in _REGISTRY.values()
        if b.thresholds is not None
        for f in dataclasses.fields(b.thresholds)
    }


def _check_threshold_keys(benchmark: Benchmark) -> None:
    if benchmark.thresholds is None:
        return
    taken = {f.name for f in dataclasses.fields(Thresholds)}
    taken |= {k for k, kind in threshold_keys().items() if kind is not benchmark.thresholds}
    clash = sorted(taken & {f.name for f in dataclasses.fields(benchmark.thresholds)})
    if clash:
        raise ValueError(f"benchmark {benchmark.name!r}: threshold {clash[0]!r} is taken")


_RUN_PARTS: dict[str, RunPart] = {}
"""Name -> declaration, in registration order: the order of their findings, sections and plots."""


def register_run_part(part: RunPart) -> RunPart:
    """Add a run part; the same declaration twice is allowed, another under a taken name not."""
    held = _RUN_PARTS.get(part.name)
    if held is not None and held != part:
        raise ValueError(f"run part {part.name!r} registered twice")
    _RUN_PARTS[part.name] = part
    return part


def run_parts() -> list[RunPart]:
    """Every registered run part, in order."""
    return list(_RUN_PARTS.values())


def get_run_part(name: str) -> RunPart:
    try:
        return _RUN_PARTS[name]
    except KeyError:
        known = ", ".join(_RUN_PARTS)
        raise ValueError(f"unknown run part {name!r} (known: {known})") from None


def find(name: str) -> Benchmark | None:
    """The benchmark registered under ``name``, or None."""
    return _REGISTRY.get(name)


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
