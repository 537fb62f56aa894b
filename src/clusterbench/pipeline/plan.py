"""The plan of a run before it starts (:class:`RunPlan`): what the node measured, each
benchmark's expected time, and with a budget (``--budget``, ``time_budget_s``) the settings cut
to fit it.

Reads what the plan needs (the history of this host, the shipped timing table, the GPU's spec)
and hands it to the pure planning (:mod:`clusterbench.analyses.budget.plan`); the result is
applied to the run's settings and kept in results.json (``run.plan``).  Under an external
launcher every rank plans by itself, so the plan uses no history there: the table and the
models give every rank the same settings.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import statistics
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from clusterbench import registry
from clusterbench.analyses.budget.plan import (
    PlanInput,
    Reference,
    RunBudgetPlan,
    make_plan,
    reserve_s,
)
from clusterbench.analyses.duration import (
    Expected,
    PastTimings,
    TimingTable,
    expected_seconds,
    pick_table,
)
from clusterbench.config import RunConfig
from clusterbench.durations import FactQuery, NodeFacts
from clusterbench.history_db import HistoryError, MetricPoint, RunTimings, open_history
from clusterbench.schema import BenchmarkPlan, PlanInfo
from clusterbench.suites import SUITE_NAMES

__all__ = [
    "NodeHistory",
    "RunPlan",
    "apply_plan",
    "expected_times",
    "node_facts",
    "plan_info",
    "plan_run",
    "read_history",
    "run_plan",
    "timing_tables",
]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class NodeHistory:
    """What the history holds of this host: earlier runs' timings and measured figures."""

    timings: Sequence[RunTimings] = ()
    facts: dict[str, float] = dataclasses.field(default_factory=dict)


def read_history(
    path: Path | None,
    *,
    suite: str,
    backend: str,
    world_size: int,
    host: str,
    queries: Sequence[FactQuery],
) -> NodeHistory:
    """This host's timings (runs like this one) and figures, newest first; a history that
    cannot be read gives none (recording the run says what is wrong with it)."""
    try:
        with open_history(path) as store:
            timings = store.timings(suite=suite, backend=backend, world_size=world_size, host=host)
            facts = {}
            for q in queries:
                value = _fact(store.points(q.benchmark, q.metric), q, host=host)
                if value is not None:
                    facts[q.name] = value
    except HistoryError:
        return NodeHistory()
    return NodeHistory(timings=timings, facts=facts)


def _fact(points: Sequence[MetricPoint], q: FactQuery, *, host: str) -> float | None:
    """The newest run's values of ``q`` on ``host``, reduced as ``q.pick`` says."""
    mine = [
        p
        for p in points
        if p.host == host and all(p.params.get(k) == v for k, v in q.params.items())
    ]
    if not mine:
        return None
    newest = max(p.started for p in mine)
    values = [p.value * q.scale for p in mine if p.started == newest]
    if q.pick == "max":
        return max(values)
    if q.pick == "min":
        return min(values)
    return float(statistics.median(values))


def node_facts(
    *,
    device_type: str,
    world_size: int,
    local_world_size: int,
    gpu: str | None,
    measured: dict[str, float],
) -> NodeFacts:
    from clusterbench.hardware.specs import match_spec

    spec = match_spec(gpu) if gpu else None
    return NodeFacts(
        device_type=device_type,
        world_size=world_size,
        local_world_size=local_world_size,
        num_nodes=max(1, world_size // max(1, local_world_size)),
        gpu=gpu,
        spec_tflops=dict(spec.dense_tflops) if spec is not None else {},
        spec_memory_gbps=spec.hbm_gbps if spec is not None else None,
        measured=measured,
    )


def plan_run(
    config: RunConfig,
    *,
    device_type: str,
    facts: NodeFacts,
    history: NodeHistory,
    tables: Sequence[TimingTable],
    expected: Sequence[Expected],
) -> RunBudgetPlan:
    """Each selected benchmark's plan; ``expected``: the duration module's figures, for the
    benchmarks without a duration model."""
    figures = {e.benchmark: e for e in expected}
    items = []
    for name, cfg in config.benchmarks.items():
        bench = registry.get(name)
        if not bench.supports(device_type):
            continue
        e = figures.get(name)
        items.append(
            PlanInput(
                name=name,
                settings=cfg,
                model=bench.durations,
                facts=facts,
                reference=_reference(
                    name, cfg, facts=facts, history=history, tables=tables, suite=config.suite
                ),
                time_budget_s=config.time_budgets.get(name),
                expected_s=e.seconds if e else None,
                expected_source=e.source if e else "none",
            )
        )
    budget = config.budget_s
    reserve = 0.0 if budget is None else reserve_s(device_type, budget)
    return make_plan(items, budget_s=budget, reserve_s=reserve)


def _reference(
    name: str,
    cfg: Any,
    *,
    facts: NodeFacts,
    history: NodeHistory,
    tables: Sequence[TimingTable],
    suite: str,
) -> Reference | None:
    """Earlier runs of ``name`` here: the median of the newest :data:`MAX_RUNS` with these
    very settings, else the newest with any (scaled by the model); else the table's nearest
    entry of it (this suite's first, then the others')."""
    same = _same_settings(name, cfg, history)
    if same:
        label = f"history, {len(same)} run{'s' if len(same) != 1 else ''}"
        return Reference(
            seconds=statistics.median(same),
            settings=cfg,
            facts=facts,
            source="history",
            label=label,
        )
    for run in history.timings:
        seconds, stored = run.benchmark_seconds.get(name), run.settings.get(name)
        if seconds is None or not isinstance(stored, dict):
            continue
        try:
            settings = type(cfg)(**stored)
        except (TypeError, ValueError):  # settings of another clusterbench version
            continue
        return Reference(
            seconds=seconds,
            settings=settings,
            facts=facts,
            source="history",
            label=f"history, run {run.run_id}",
        )
    bench = registry.get(name)
    for s in sorted(SUITE_NAMES, key=lambda x: x != suite):
        table = pick_table(
            tables,
            suite=s,
            device_type=facts.device_type,
            gpu=facts.gpu,
            world_size=facts.world_size,
        )
        if table is None or name not in table.benchmark_seconds:
            continue
        if table.device_type == "cuda" and table.gpu != facts.gpu:
            continue  # another GPU model's time says little of this one's
        at = dataclasses.replace(
            facts,
            world_size=table.world_size,
            local_world_size=table.world_size,
            num_nodes=1,
            measured={},
        )
        preset = bench.preset(suite=s, device_type=facts.device_type)
        return Reference(
            seconds=table.benchmark_seconds[name],
            settings=preset,
            facts=at,
            source="table",
            label=table.label,
        )
    return None


MAX_RUNS = 5
"""Earlier runs with the same settings whose median is the expected time."""


def _same_settings(name: str, cfg: Any, history: NodeHistory) -> list[float]:
    """Seconds of ``name`` in the newest :data:`MAX_RUNS` earlier runs with ``cfg`` itself."""
    mine = json.dumps(dataclasses.asdict(cfg), sort_keys=True, default=str)
    seen = [
        run.benchmark_seconds[name]
        for run in history.timings
        if name in run.benchmark_seconds
        and json.dumps(run.settings.get(name), sort_keys=True, default=str) == mine
    ]
    return seen[:MAX_RUNS]


def apply_plan(config: RunConfig, plan: RunBudgetPlan) -> None:
    """Run each benchmark with its fitted settings."""
    for planned in plan.benchmarks:
        if planned.cuts:
            config.benchmarks[planned.name] = planned.settings


def plan_info(plan: RunBudgetPlan) -> PlanInfo:
    """The plan as results.json keeps it."""
    return PlanInfo(
        budget_s=plan.budget_s,
        expected_s=_rounded(plan.expected_s),
        reserve_s=round(plan.reserve_s, 3),
        fits=plan.fits,
        benchmarks=[
            BenchmarkPlan(
                benchmark=b.name,
                expected_s=_rounded(b.expected_s),
                source=b.source,
                terms=[f"{t.what}: {t.seconds:.3g} s" for t in b.terms]
                + ([f"calibrated {b.calibration}"] if b.calibration else []),
                budget_s=_rounded(b.budget_s),
                cuts=list(b.cuts),
                expected_before_s=_rounded(b.before_s),
            )
            for b in plan.benchmarks
        ],
    )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


# ----------------------------------------------------------------------------- expected time


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunPlan:
    """What a run is about to do: enough to say how long it should take, before it starts."""

    suite: str
    device_type: str
    backend: str
    world_size: int
    host: str
    """This machine (rank 0's under a launcher)."""
    gpu: str | None
    """The GPU model (NVML's name; None on CPU or without NVML)."""
    settings: dict[str, Any]
    """Benchmark -> its settings as results.json keeps them, for the benchmarks that run here,
    in run order."""
    at_preset: frozenset[str]
    """The benchmarks that run with their suite's preset settings (no file or --set changed)."""
    budget: RunBudgetPlan | None = None
    """Each benchmark's expected seconds from its cost model and, with ``--budget`` or a
    ``time_budget_s``, its deadline and what was cut to fit it (the settings above are those
    asked for, before the cuts)."""


def run_plan(config: RunConfig, *, device_type: str, world_size: int) -> RunPlan:
    """The plan of a run of ``config`` on ``world_size`` ranks of this machine."""
    settings = {}
    at_preset = set()
    for name, cfg in config.benchmarks.items():
        bench = registry.get(name)
        if not bench.supports(device_type):
            continue
        settings[name] = dataclasses.asdict(cfg)
        preset = bench.preset(suite=config.suite, device_type=device_type)
        if dataclasses.asdict(preset) == settings[name]:
            at_preset.add(name)
    return RunPlan(
        suite=config.suite,
        device_type=device_type,
        backend="nccl" if device_type == "cuda" else "gloo",
        world_size=world_size,
        host=socket.gethostname(),
        gpu=_gpu_model() if device_type == "cuda" else None,
        settings=settings,
        at_preset=frozenset(at_preset),
    )


def _gpu_model() -> str | None:
    """GPU 0's model through NVML: this process makes no CUDA context of its own."""
    from clusterbench.hardware.probe import nvml_session, probe_gpus

    with nvml_session() as nvml:
        gpus = probe_gpus(nvml) if nvml is not None else []
    return gpus[0].name if gpus else None


_TIMINGS_RESOURCE = ("data", "benchmark_seconds.json")


def timing_tables() -> list[TimingTable]:
    """The timings shipped with clusterbench (``clusterbench/data/benchmark_seconds.json``):
    each suite at its presets, measured on CPU and on GPUs."""
    text = resources.files("clusterbench").joinpath(*_TIMINGS_RESOURCE).read_text("utf-8")
    return [
        TimingTable(
            device_type=entry["device_type"],
            gpu=entry.get("gpu"),
            world_size=int(entry["world_size"]),
            suite=entry["suite"],
            benchmark_seconds={k: float(v) for k, v in entry["benchmark_seconds"].items()},
        )
        for entry in json.loads(text)["tables"]
    ]


def expected_times(plan: RunPlan, past: Sequence[RunTimings]) -> list[Expected]:
    """Each benchmark's expected seconds: from ``past`` (earlier comparable runs, newest
    first, from :meth:`History.timings`) where they ran it with these settings, else from the
    shipped timing table where it runs at its preset."""
    table = pick_table(
        timing_tables(),
        suite=plan.suite,
        device_type=plan.device_type,
        gpu=plan.gpu,
        world_size=plan.world_size,
    )
    earlier = [
        PastTimings(benchmark_seconds=r.benchmark_seconds, settings=r.settings) for r in past
    ]
    return expected_seconds(
        settings=plan.settings, past=earlier, table=table, at_preset=plan.at_preset
    )
