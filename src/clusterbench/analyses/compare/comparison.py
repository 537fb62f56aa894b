"""Compare two runs: every measurement matched, each change judged (a pure function).

:func:`compare` matches the measurements of two :class:`~clusterbench.schema.Results` by
(benchmark, metric, unit, params) and where they were measured: the host and device
(``match="host"``), or the device and its GPU model, hostname ignored (``match="gpu"``: one
node against another).  Each pair becomes a :class:`ComparisonRow` with a verdict from
:func:`~clusterbench.analyses.compare.rule.judge`; figures of only one run are ``new`` or
``missing``.  Regressions become findings (:func:`regression_findings`), whose fix names what
changed between the runs' metadata.

The models are pydantic (frozen): ``Comparison.model_dump_json()`` is what ``compare --json``
prints and ``run --baseline`` writes as ``comparison.json``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from clusterbench import registry
from clusterbench.analyses.compare.metadata import MetadataChange, fix_hint, metadata_diff
from clusterbench.analyses.compare.noise import KindSpread, group_spread
from clusterbench.analyses.compare.rule import (
    MIN_RUNS,
    Judged,
    Reason,
    Verdict,
    control_false_alarms,
    judge,
)
from clusterbench.metrics import Direction, direction_of, is_tail
from clusterbench.schema import Finding, Measurement, ParamValue, Results, Severity, one_round
from clusterbench.thresholds import Thresholds

__all__ = [
    "Comparison",
    "ComparisonRow",
    "EarlierRuns",
    "Match",
    "MetadataChange",
    "RunRef",
    "compare",
    "device_model",
    "identity_params",
    "index_measurements",
    "metadata_diff",
    "params_key",
    "regression_findings",
    "run_ref",
]

Match = Literal["host", "gpu"]
VERDICTS: tuple[Verdict, ...] = ("regression", "improvement", "new", "missing", "unchanged")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RunRef(_Frozen):
    """What one side of a comparison is: a run, or a baseline."""

    kind: Literal["run", "baseline", "builtin"] = "run"
    id: str
    started: str | None = None
    suite: str | None = None
    hosts: list[str] = Field(default_factory=list)
    version: str | None = Field(default=None, description="clusterbench version of the run")


class ComparisonRow(_Frozen):
    """One figure in both runs (or in one of them)."""

    benchmark: str
    metric: str
    unit: str
    params: dict[str, ParamValue] = Field(default_factory=dict)
    host: str = Field(description="where the new figure was measured (missing: the base's)")
    device: str
    base_host: str | None = Field(
        default=None, description="the base figure's host where it differs (match='gpu')"
    )
    gpu: str | None = Field(default=None, description="GPU model (device kind on CPU)")
    base: float | None = None
    new: float | None = None
    change: float | None = Field(default=None, description="(new - base) / |base|")
    direction: Direction | None = Field(default=None, description="which way is better")
    verdict: Verdict
    severity: Literal["warn", "fail"] | None = None
    p_value: float | None = Field(
        default=None,
        description="two-sided p of the test that judged it: run-to-run Student t where the "
        "history holds 3 or more earlier runs, else the repeats' Mann-Whitney",
    )
    noise: str = Field(default="", description="how the noise was judged, or why not")
    reason: Reason | None = Field(
        default=None,
        description="why it is unchanged: within_limit (the practical limit), inside_noise, "
        "noise_unknown (beyond the limit, no estimate of the noise), not_judged",
    )

    @property
    def name(self) -> str:
        return f"{self.benchmark}.{self.metric}"


class Comparison(_Frozen):
    """Every row of a comparison, the metadata that changed, and the regression findings."""

    base: RunRef
    new: RunRef
    match: Match = "host"
    num_previous: int = Field(default=0, description="earlier runs used for run-to-run noise")
    false_alarms: float | None = Field(
        default=None,
        description="the level the false alarms of all rows were held at "
        "(thresholds.regression_false_alarms, Benjamini-Hochberg)",
    )
    rows: list[ComparisonRow] = Field(default_factory=list)
    metadata: list[MetadataChange] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    note: str = ""

    def count(self, verdict: Verdict) -> int:
        return sum(r.verdict == verdict for r in self.rows)

    def counts(self) -> dict[str, int]:
        return {v: self.count(v) for v in VERDICTS}

    @property
    def failed(self) -> bool:
        return any(f.severity == "fail" for f in self.findings)


def run_ref(results: Results) -> RunRef:
    return RunRef(
        id=results.run.id,
        started=results.run.started,
        suite=results.run.suite,
        hosts=sorted({h.hostname for h in results.hosts} | {m.host for m in results.measurements}),
        version=results.tool.version,
    )


def device_model(results: Results, host: str, device: str) -> str:
    """The GPU model of ``device`` on ``host`` as the probe named it ("NVIDIA H200"), else the
    device kind ("cpu", or "cuda" for a GPU the probe did not list)."""
    kind, _, index = device.partition(":")
    if kind == "cuda" and index.isdigit():
        for h in results.hosts:
            if h.hostname != host:
                continue
            for gpu in h.gpus:
                if gpu.index == int(index):
                    return gpu.name
    return kind


def compare(
    base: Results,
    new: Results,
    thresholds: Thresholds,
    *,
    match: Match = "host",
    previous: Sequence[Results] = (),
) -> Comparison:
    """``new`` against ``base``, row by row; ``previous``: earlier comparable runs, whose
    values give the run-to-run noise of each figure (3 or more needed)."""
    base_index = index_measurements(base, match)
    new_index = index_measurements(new, match)
    history = EarlierRuns.of(previous, match=match)
    earlier = {
        key: history.values(key, benchmark=m.benchmark, like=new)
        for key, m in new_index.items()
        if key in base_index
    }
    kinds = kind_spreads(earlier)
    rows: list[ComparisonRow] = []
    pairs: list[tuple[Measurement, Measurement, str | None, Judged]] = []
    keys: list[_Key] = []
    for key, m in new_index.items():
        gpu = device_model(new, m.host, m.device) if match == "gpu" else None
        b = base_index.get(key)
        if b is None:
            rows.append(_row(m, verdict="new", gpu=gpu, new=m.value))
            continue
        judged = _judge_pair(b, m, thresholds, history=earlier[key], kind=kinds.get(_kind(key)))
        pairs.append((b, m, gpu, judged))
        keys.append(key)
    held = control_false_alarms(
        [j for *_, j in pairs],
        thresholds.regression_false_alarms,
        families=[_kind(k) for k in keys],
    )
    rows += [_pair_row(b, m, j, gpu=gpu) for (b, m, gpu, _), j in zip(pairs, held, strict=True)]
    for key, b in base_index.items():
        if key not in new_index:
            gpu = device_model(base, b.host, b.device) if match == "gpu" else None
            rows.append(_row(b, verdict="missing", gpu=gpu, base=b.value))
    metadata = metadata_diff(base, new)
    return Comparison(
        base=run_ref(base),
        new=run_ref(new),
        match=match,
        num_previous=len(previous),
        false_alarms=thresholds.regression_false_alarms,
        rows=rows,
        metadata=metadata,
        findings=regression_findings(rows, metadata=metadata, against=f"run {base.run.id}"),
    )


def _kind(key: _Key) -> _Key:
    """A figure's kind: its key without the params and the occurrence (one metric on one
    device)."""
    return (*key[:3], *key[4:-1])


def kind_spreads(earlier: dict[_Key, list[float]]) -> dict[_Key, KindSpread]:
    """The run-to-run spread of each kind of figure over the earlier runs
    (:func:`~clusterbench.analyses.compare.noise.group_spread`; kinds without enough runs left
    out)."""
    by_kind: dict[_Key, list[list[float]]] = defaultdict(list)
    for key, values in earlier.items():
        by_kind[_kind(key)].append(values)
    out = {}
    for kind, histories in by_kind.items():
        spread = group_spread(histories, min_values=MIN_RUNS)
        if spread is not None:
            out[kind] = spread
    return out


def _judge_pair(
    b: Measurement,
    m: Measurement,
    thresholds: Thresholds,
    *,
    history: list[float],
    kind: KindSpread | None,
) -> Judged:
    return judge(
        base=b.value,
        new=m.value,
        unit=m.unit,
        device=m.device,
        direction=direction_of(m),
        thresholds=thresholds,
        base_samples=_samples(b),
        new_samples=_samples(m),
        history=history,
        kind_spread=kind,
        tail=is_tail(m),
    )


def _pair_row(b: Measurement, m: Measurement, judged: Judged, *, gpu: str | None) -> ComparisonRow:
    return _row(
        m,
        verdict=judged.verdict,
        gpu=gpu,
        base=b.value,
        new=m.value,
        base_host=b.host if b.host != m.host else None,
        change=judged.change,
        severity=judged.severity,
        p_value=judged.p_value,
        noise=judged.noise,
        reason=judged.reason,
        direction=direction_of(m),
    )


def _row(m: Measurement, *, verdict: Verdict, **fields: object) -> ComparisonRow:
    fields.setdefault("direction", direction_of(m))
    return ComparisonRow(
        benchmark=m.benchmark,
        metric=m.metric,
        unit=m.unit,
        params=dict(m.params),
        host=m.host,
        device=m.device,
        verdict=verdict,
        **fields,  # type: ignore[arg-type]
    )


def _samples(m: Measurement) -> list[float]:
    return list(m.stats.values or []) if m.stats is not None else []


def params_key(params: dict[str, ParamValue]) -> str:
    """The params as canonical JSON: equal params, equal text."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


def identity_params(m: Measurement) -> dict[str, ParamValue]:
    """The params that identify ``m``'s figure: those its benchmark declares to name a winning
    case (``Benchmark.winner_params``) left out, so that rows match whatever case won."""
    benchmark = registry.find(m.benchmark)
    winner = benchmark.winners(m.metric) if benchmark is not None else frozenset()
    if not winner:
        return m.params
    return {k: v for k, v in m.params.items() if k not in winner}


_MAX_EVIDENCE_ROWS = 20


def regression_findings(
    rows: Sequence[ComparisonRow],
    *,
    metadata: Sequence[MetadataChange],
    against: str,
    metadata_known: bool = True,
) -> list[Finding]:
    """One finding per regressed metric and host: ``regression.<benchmark>.<metric>``, ``fail``
    when any of its rows is, with the rows as evidence and a fix naming what changed
    (``metadata_known`` False: ``against`` has no run metadata, e.g. a baseline)."""
    groups: dict[tuple[str, str, str], list[ComparisonRow]] = defaultdict(list)
    for row in rows:
        if row.verdict == "regression":
            groups[(row.benchmark, row.metric, row.host)].append(row)
    fix = fix_hint(metadata, against=against, known=metadata_known)
    return [
        _finding(group, against=against, fix=fix) for (_, _, _), group in sorted(groups.items())
    ]


def _finding(group: list[ComparisonRow], *, against: str, fix: str) -> Finding:
    worst = max(group, key=lambda r: abs(r.change or 0.0))
    severity: Severity = "fail" if any(r.severity == "fail" for r in group) else "warn"
    p = f", p={worst.p_value:.2g}" if worst.p_value is not None else ""
    what = ", ".join(f"{k}={v}" for k, v in worst.params.items()) or "no params"
    rows = "1 row" if len(group) == 1 else f"{len(group)} rows"
    message = (
        f"{worst.name} worse than {against} on {worst.host}: {rows}, worst {worst.change:+.0%} "
        f"({worst.base:.4g} -> {worst.new:.4g} {worst.unit} on {worst.device}{p}; {what})"
    )
    return Finding(
        id=f"regression.{worst.benchmark}.{worst.metric}",
        severity=severity,
        scope=f"host:{worst.host}",
        message=message,
        evidence={
            "against": against,
            "num_rows": len(group),
            "rows": [_evidence(r) for r in group[:_MAX_EVIDENCE_ROWS]],
        },
        fix=fix,
    )


def _evidence(row: ComparisonRow) -> dict[str, Any]:
    return {
        "device": row.device,
        "params": row.params,
        "base": row.base,
        "new": row.new,
        "change": row.change,
        "p_value": row.p_value,
        "noise": row.noise,
    }


_Key = tuple[str, ...]


def benchmark_settings(results: Results, benchmark: str) -> object:
    """The settings ``benchmark`` ran with (``run.config.benchmarks``; None if not recorded)."""
    benchmarks = results.run.config.get("benchmarks")
    return benchmarks.get(benchmark) if isinstance(benchmarks, dict) else None


@dataclass(frozen=True, slots=True)
class EarlierRuns:
    """Earlier runs' measurements by matching key, for the run-to-run noise of each figure."""

    runs: tuple[tuple[Results, dict[_Key, Measurement]], ...]

    @classmethod
    def of(cls, previous: Sequence[Results], *, match: Match) -> EarlierRuns:
        return cls(tuple((r, index_measurements(r, match)) for r in previous))

    def values(self, key: _Key, *, benchmark: str, like: Results) -> list[float]:
        """The figure in each earlier run that ran ``benchmark`` with ``like``'s settings (a
        sweep of other shapes or sizes is another experiment)."""
        wanted = benchmark_settings(like, benchmark)
        return [
            index[key].value
            for r, index in self.runs
            if key in index and benchmark_settings(r, benchmark) == wanted
        ]


def index_measurements(results: Results, match: Match) -> dict[_Key, Measurement]:
    """Measurements by their matching key; a key seen again gets its occurrence number (the
    n-th of one run is paired with the n-th of the other)."""
    out: dict[_Key, Measurement] = {}
    seen: dict[_Key, int] = {}
    for m, key in _keys(results, match):
        n = seen.get(key, 0)
        seen[key] = n + 1
        out[(*key, str(n))] = m
    return out


def _keys(results: Results, match: Match) -> Iterator[tuple[Measurement, _Key]]:
    # a soak is compared by one round, the one its summary shows (the last complete one)
    for m in one_round(results).measurements:
        where = (
            (m.host, m.device)
            if match == "host"
            else (m.device, device_model(results, m.host, m.device))
        )
        yield m, (m.benchmark, m.metric, m.unit, params_key(identity_params(m)), *where)
