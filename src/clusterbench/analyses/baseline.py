"""Baselines: a fleet's figures per GPU model, and a run compared with them (pure functions).

:func:`build_baseline` turns many runs, or many nodes of one run, into one
:class:`BaselineEntry` per (benchmark, metric, unit, params, GPU model or device kind): the
median, the MAD and the count of the figures, with their sources.  :func:`compare_baseline`
judges every figure of a run against its entry with the rule of
:mod:`~clusterbench.analyses.compare.rule`: beyond the practical limit and beyond the noise, a
Student t test against the entry's robust spread (1.4826 x MAD / median) when it holds 3 or
more figures, else against the run-to-run noise of earlier runs, else the noise is unknown;
the false alarms of all rows held together (``regression_false_alarms``).
The built-in baseline (``kind="builtin"``) holds known-good figures of healthy GPUs: there the
practical limit below the figure is the rule.
"""

from __future__ import annotations

import functools
import statistics
from collections import defaultdict
from collections.abc import Sequence
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from clusterbench.analyses.compare.comparison import (
    Comparison,
    ComparisonRow,
    EarlierRuns,
    RunRef,
    device_model,
    identity_params,
    index_measurements,
    params_key,
    regression_findings,
    run_ref,
)
from clusterbench.analyses.compare.rule import MAD_TO_SIGMA, Judged, control_false_alarms, judge
from clusterbench.metrics import Direction, direction_of, is_tail
from clusterbench.schema import Measurement, ParamValue, Results, one_round
from clusterbench.thresholds import Thresholds

__all__ = [
    "Baseline",
    "BaselineEntry",
    "build_baseline",
    "builtin_baseline",
    "compare_baseline",
]

BaselineKind = Literal["fleet", "builtin"]


class BaselineEntry(BaseModel):
    """One figure of a baseline: where it applies and what it is."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    benchmark: str
    metric: str
    unit: str
    params: dict[str, ParamValue] = Field(default_factory=dict)
    params_match: Literal["exact", "subset"] = Field(
        default="exact",
        description="exact: a measurement's params must equal these; subset: it must have "
        "these (and may have more), e.g. the best GEMM shape of a dtype, whatever the shape",
    )
    model: str = Field(description="GPU model as the probe names it, or the device kind (cpu)")
    median: float
    mad: float = Field(default=0.0, ge=0, description="median absolute deviation of the figures")
    count: int = Field(default=1, ge=1, description="figures the median is taken over")
    better: Direction | None = Field(
        default=None,
        description="which way is better, where the metric's declaration has no side (MFU)",
    )
    sources: list[str] = Field(default_factory=list, description="runs or documents it is from")

    @property
    def spread(self) -> float | None:
        """Relative robust spread, 1.4826 x MAD / |median| (None: median 0)."""
        return MAD_TO_SIGMA * self.mad / abs(self.median) if self.median else None

    def matches(self, m: Measurement, model: str) -> bool:
        if (m.benchmark, m.metric, m.unit) != (self.benchmark, self.metric, self.unit):
            return False
        if model != self.model:
            return False
        params = identity_params(m)
        if self.params_match == "exact":
            return params_key(params) == params_key(self.params)
        return all(k in params and params[k] == v for k, v in self.params.items())


class Baseline(BaseModel):
    """A baseline file (``clusterbench baseline build``, or the built-in one)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["clusterbench-baseline"] = "clusterbench-baseline"
    version: Literal[1] = 1
    kind: BaselineKind = "fleet"
    name: str
    description: str = ""
    runs: list[str] = Field(default_factory=list, description="ids of the runs it was built from")
    entries: list[BaselineEntry] = Field(default_factory=list)

    def models(self) -> list[str]:
        return sorted({e.model for e in self.entries})


@functools.cache
def builtin_baseline() -> Baseline:
    """Known-good figures of healthy GPUs that clusterbench's docs record, each with its source
    (package data, ``clusterbench/data/builtin_baseline.json``; read once)."""
    text = (
        resources.files("clusterbench").joinpath("data", "builtin_baseline.json").read_text("utf-8")
    )
    return Baseline.model_validate_json(text)


def build_baseline(runs: Sequence[Results], *, name: str = "fleet") -> Baseline:
    """The median, MAD and count of every figure over ``runs`` (each device of each run counts
    once), per (benchmark, metric, unit, params, GPU model or device kind)."""
    if not runs:
        raise ValueError("a baseline needs at least one run")
    values: dict[tuple[str, str, str, str, str], list[float]] = defaultdict(list)
    sources: dict[tuple[str, str, str, str, str], set[str]] = defaultdict(set)
    first: dict[tuple[str, str, str, str, str], Measurement] = {}
    for results in runs:
        for m in one_round(results).measurements:  # a soak: the round its summary shows
            key = (
                m.benchmark,
                m.metric,
                m.unit,
                params_key(identity_params(m)),
                _model(results, m),
            )
            values[key].append(m.value)
            sources[key].add(f"{results.run.id}:{m.host}")
            first.setdefault(key, m)
    if not values:
        raise ValueError("the runs hold no measurements")
    entries = [_entry(first[key], key[4], vals, sources[key]) for key, vals in values.items()]
    return Baseline(name=name, runs=[r.run.id for r in runs], entries=entries)


def _model(results: Results, m: Measurement) -> str:
    return device_model(results, m.host, m.device)


def _entry(m: Measurement, model: str, values: list[float], sources: set[str]) -> BaselineEntry:
    centre = statistics.median(values)
    return BaselineEntry(
        benchmark=m.benchmark,
        metric=m.metric,
        unit=m.unit,
        params=identity_params(m),
        model=model,
        median=centre,
        mad=statistics.median(abs(v - centre) for v in values),
        count=len(values),
        sources=sorted(sources),
    )


def compare_baseline(
    baseline: Baseline,
    new: Results,
    thresholds: Thresholds,
    *,
    previous: Sequence[Results] = (),
) -> Comparison:
    """Every figure of ``new`` against its baseline entry.  A fleet baseline also lists the
    run's figures it has no entry for (``new``) and its entries of the run's GPU models that
    the run did not measure (``missing``); the built-in one only the figures it knows."""
    fleet = baseline.kind == "fleet"
    history = EarlierRuns.of(previous, match="host")
    by_figure: dict[tuple[str, str, str, str], list[BaselineEntry]] = defaultdict(list)
    for e in baseline.entries:  # a measurement is matched against its figure's entries only
        by_figure[(e.benchmark, e.metric, e.unit, e.model)].append(e)
    rows: list[ComparisonRow] = []
    used: set[int] = set()
    matched: list[tuple[Measurement, BaselineEntry, list[float]]] = []
    for key, m in index_measurements(new, "host").items():
        model = _model(new, m)
        entry = _best_entry(by_figure.get((m.benchmark, m.metric, m.unit, model), []), m, model)
        if entry is None:
            if fleet:
                rows.append(_baseline_row(m, model=model, verdict="new"))
            continue
        used.add(id(entry))
        matched.append((m, entry, history.values(key, benchmark=m.benchmark, like=new)))
    judged = [
        _judge(m, entry, baseline=baseline, thresholds=thresholds, history=earlier)
        for m, entry, earlier in matched
    ]
    held = control_false_alarms(judged, thresholds.regression_false_alarms)
    rows += [
        _judged_row(m, entry, j, baseline=baseline)
        for (m, entry, _), j in zip(matched, held, strict=True)
    ]
    models = sorted({_model(new, m) for m in new.measurements})
    if fleet:
        rows += [
            _missing_row(e) for e in baseline.entries if e.model in models and id(e) not in used
        ]
    against = "the built-in baseline" if not fleet else f"the fleet baseline {baseline.name}"
    return Comparison(
        base=RunRef(kind="builtin" if not fleet else "baseline", id=baseline.name),
        new=run_ref(new),
        num_previous=len(previous),
        false_alarms=thresholds.regression_false_alarms,
        rows=rows,
        findings=regression_findings(rows, metadata=[], against=against, metadata_known=False),
        note=_note(baseline, rows, models),
    )


def _best_entry(
    entries: Sequence[BaselineEntry], m: Measurement, model: str
) -> BaselineEntry | None:
    """The matching entry with the most params (an exact one before any subset)."""
    found = [e for e in entries if e.matches(m, model)]
    if not found:
        return None
    return max(found, key=lambda e: (e.params_match == "exact", len(e.params)))


def _judge(
    m: Measurement,
    entry: BaselineEntry,
    *,
    baseline: Baseline,
    thresholds: Thresholds,
    history: list[float],
) -> Judged:
    return judge(
        base=entry.median,
        new=m.value,
        unit=m.unit,
        device=m.device,
        direction=entry.better or direction_of(m),
        thresholds=thresholds,
        history=history,
        spread=entry.spread,
        spread_count=entry.count,
        known_good=baseline.kind == "builtin",
        tail=is_tail(m),
    )


def _judged_row(
    m: Measurement, entry: BaselineEntry, judged: Judged, *, baseline: Baseline
) -> ComparisonRow:
    noise = judged.noise
    if baseline.kind == "builtin" and entry.sources:
        noise = f"{noise}; known-good: {entry.sources[0]}"
    return _baseline_row(
        m,
        model=entry.model,
        verdict=judged.verdict,
        base=entry.median,
        change=judged.change,
        severity=judged.severity,
        p_value=judged.p_value,
        noise=noise,
        reason=judged.reason,
        direction=entry.better or direction_of(m),
    )


def _baseline_row(m: Measurement, *, model: str, verdict: str, **fields: object) -> ComparisonRow:
    return ComparisonRow.model_validate(
        {
            "benchmark": m.benchmark,
            "metric": m.metric,
            "unit": m.unit,
            "params": dict(m.params),
            "host": m.host,
            "device": m.device,
            "gpu": model,
            "new": m.value,
            "verdict": verdict,
            "direction": direction_of(m),
            **fields,
        }
    )


def _missing_row(entry: BaselineEntry) -> ComparisonRow:
    return ComparisonRow(
        benchmark=entry.benchmark,
        metric=entry.metric,
        unit=entry.unit,
        params=dict(entry.params),
        host="",
        device="",
        gpu=entry.model,
        base=entry.median,
        verdict="missing",
    )


def _note(baseline: Baseline, rows: list[ComparisonRow], models: list[str]) -> str:
    if any(r.verdict not in ("new", "missing") for r in rows):
        return ""
    which = "the built-in baseline" if baseline.kind == "builtin" else f"baseline {baseline.name}"
    return (
        f"{which} has no figure for this run's devices ({', '.join(models) or 'none'}); it "
        f"has figures for: {', '.join(baseline.models()) or 'none'}"
    )
