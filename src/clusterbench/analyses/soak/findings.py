"""A soak's findings: ``soak.drift`` (a figure that worsened over the rounds), ``soak.intermittent``
(a figure missing in some rounds, a benchmark that failed after rounds that passed) and
``soak.summary`` (rounds, duration, each figure's spread over them).

The rule of a drift is :mod:`clusterbench.analyses.soak.drift`'s; these only group and word it.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from clusterbench.analyses.soak.drift import Drift, Series, SoakAnalysis
from clusterbench.analyses.soak.telemetry import DeviceRounds
from clusterbench.judging.measurements import gpu_severity, scope_label
from clusterbench.schema import Finding, Results, SoakInfo
from clusterbench.units import format_seconds

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = ["describe_drift", "findings", "ranges_text", "soak_seconds"]

_MAX_EVIDENCE_SERIES = 20
_DRIFT_FIX = (
    "A figure that worsens as the soak goes on is usually heat or power: watch the GPUs' clocks, "
    "temperature, power and throttle reasons during a soak (nvidia-smi -q -d "
    "PERFORMANCE,TEMPERATURE,POWER), check the cooling and the power cap of that device; on "
    "CPU workers, other load on the machine does the same."
)
_INTERMITTENT_FIX = (
    "A benchmark that passes some rounds and not others is a flaky device, link or driver: see "
    "the error and the rank's log, run the soak again with --only on that benchmark, and check "
    "the device's Xid and ECC counters (clusterbench doctor)."
)


def findings(results: Results, run: RunView) -> list[Finding]:
    """A soak's findings (none outside a soak), from the soak's one analysis (``run.part``)."""
    soak = results.run.soak
    analysed: SoakAnalysis | None = run.part("soak")
    if soak is None or analysed is None:
        return []
    drifts = [d for d in analysed.drifts if d is not None]
    return [
        *_drift_findings(results, [d for d in drifts if d.drifted]),
        *_missing_findings(analysed.series, soak),
        *_failed_finding(results, soak),
        _summary(results, soak, analysed, drifts),
    ]


def describe_drift(d: Drift) -> str:
    """``0.3 -> 0.8 s (+167%) over 6 rounds, +0.26 s/h``."""
    s = d.series
    per = "h" if d.per_hour else "round"
    return (
        f"{d.first:.4g} -> {d.last:.4g} {s.unit} ({d.change:+.0%}) over {len(s.values)} rounds, "
        f"{d.slope:+.3g} {s.unit}/{per}"
    )


def _params_text(s: Series) -> str:
    return ", ".join(f"{k}={v}" for k, v in s.params.items())


def _drift_findings(results: Results, drifts: Sequence[Drift]) -> list[Finding]:
    """One finding per figure (benchmark.metric) whose series drifted, naming the worst."""
    groups: dict[str, list[Drift]] = defaultdict(list)
    for d in drifts:
        groups[d.series.name].append(d)
    out = []
    for name, group in groups.items():
        worst = max(group, key=lambda d: abs(d.change))
        s = worst.series
        way = "fell" if s.direction == "higher" else "rose"
        params = f" ({_params_text(s)})" if s.params else ""
        more = f"; {len(group) - 1} more series drifted" if len(group) > 1 else ""
        message = (
            f"{name}{params} {way} during the soak on {s.device} of {s.host}: "
            f"{describe_drift(worst)} (Theil-Sen); Mann-Kendall p={worst.p_value:.2g}, beyond "
            f"the rounds' noise of {worst.noise:.3g} {s.unit}{more}"
        )
        out.append(
            Finding(
                id="soak.drift",
                severity=gpu_severity(results, "warn"),
                scope=scope_label(s.host, s.device),
                message=message,
                evidence={
                    "figure": name,
                    "num_series": len(group),
                    "series": [_drift_evidence(d) for d in group[:_MAX_EVIDENCE_SERIES]],
                },
                fix=_DRIFT_FIX,
            )
        )
    return out


def _drift_evidence(d: Drift) -> dict[str, Any]:
    s = d.series
    return {
        "params": s.params,
        "host": s.host,
        "device": s.device,
        "unit": s.unit,
        "rounds": list(s.rounds),
        "values": list(s.values),
        "first": d.first,
        "last": d.last,
        "change": d.change,
        "slope": d.slope,
        "slope_per": "hour" if d.per_hour else "round",
        "kendall_tau": d.tau,
        "p_value": d.p_value,
        "noise": d.noise,
    }


def ranges_text(numbers: Sequence[int]) -> str:
    """``0-2, 5``: sorted round numbers with runs of consecutive ones joined."""
    parts: list[str] = []
    ordered = sorted(set(numbers))
    start = prev = ordered[0] if ordered else 0
    for n in [*ordered[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(parts) if ordered else ""


def _missing_findings(series: Sequence[Series], soak: SoakInfo) -> list[Finding]:
    """Figures present in some complete rounds and missing in others, one finding each."""
    complete = set(range(soak.completed))
    groups: dict[str, list[tuple[Series, list[int]]]] = defaultdict(list)
    for s in series:
        present = complete & set(s.rounds)
        missing = sorted(complete - present)
        if present and missing:
            groups[s.name].append((s, missing))
    out = []
    for name, group in groups.items():
        s, missing = group[0]
        more = f"; {len(group) - 1} more series" if len(group) > 1 else ""
        params = f" ({_params_text(s)})" if s.params else ""
        out.append(
            Finding(
                id="soak.intermittent",
                severity="warn",
                scope=scope_label(s.host, s.device),
                message=f"{name}{params} on {s.device} of {s.host} is missing in round(s) "
                f"{ranges_text(missing)} of the {soak.completed} complete rounds, present in "
                f"the others{more}",
                evidence={
                    "figure": name,
                    "series": [
                        {"params": x.params, "host": x.host, "device": x.device, "missing": m}
                        for x, m in group[:_MAX_EVIDENCE_SERIES]
                    ],
                },
                fix=_INTERMITTENT_FIX,
            )
        )
    return out


def _failed_finding(results: Results, soak: SoakInfo) -> list[Finding]:
    """The run failed in a benchmark after earlier rounds passed it: intermittent."""
    culprit = next((e for e in results.errors if e.benchmark), None)
    failed_in = soak.stopped_in
    if results.run.status != "failed" or culprit is None or not failed_in:
        return []
    return [
        Finding(
            id="soak.intermittent",
            severity="fail",
            scope=scope_label(culprit.host) if culprit.host else "run",
            message=f"{culprit.benchmark} passed round(s) {ranges_text(list(range(failed_in)))} "
            f"of the soak, then failed in round {failed_in}"
            + (f" on rank {culprit.rank}" if culprit.rank is not None else "")
            + " (the run's error says why): an intermittent failure",
            evidence={"benchmark": culprit.benchmark, "failed_in": failed_in, "rank": culprit.rank},
            fix=_INTERMITTENT_FIX,
        )
    ]


def soak_seconds(soak: SoakInfo) -> float | None:
    """The soak's wall time: the first round's start to the last finished round's end."""
    ends = [
        start + seconds
        for start, seconds in zip(soak.round_started, soak.round_seconds, strict=False)
        if seconds is not None
    ]
    if not ends or not soak.round_started:
        return None
    return max(ends) - soak.round_started[0]


def _asked(soak: SoakInfo) -> str:
    if soak.repeat is not None:
        return f"--repeat {soak.repeat}"
    return f"--soak {format_seconds(soak.duration_s)}" if soak.duration_s else "a soak"


def _spread(s: Series) -> float:
    centre = statistics.median(s.values)
    return (max(s.values) - min(s.values)) / abs(centre) if centre else 0.0


def _summary(
    results: Results, soak: SoakInfo, analysed: SoakAnalysis, drifts: Sequence[Drift]
) -> Finding:
    """Rounds, duration and each figure's spread over the rounds (its widest series)."""
    series, telemetry = analysed.series, analysed.telemetry
    figures: dict[str, list[Series]] = defaultdict(list)
    for s in series:
        if len(s.values) > 1:
            figures[s.name].append(s)
    spreads: dict[str, dict[str, Any]] = {}
    for name, group in figures.items():
        widest = max(group, key=_spread)
        spreads[name] = {
            "num_series": len(group),
            "median_spread": statistics.median(_spread(s) for s in group),
            "max_spread": _spread(widest),
            "widest": f"{widest.host}/{widest.device}",
        }
    wall = soak_seconds(soak)
    took = f" in {format_seconds(wall)}" if wall is not None else ""
    drifted = sorted({d.series.name for d in drifts if d.drifted})
    parts = [
        f"soak ({_asked(soak)}): {soak.rounds} round(s) started, {soak.completed} complete{took}",
        f"{len(series)} series of {len(figures)} figure(s) over the rounds",
        f"drift beyond the noise: {', '.join(drifted)}" if drifted else "no drift beyond the noise",
    ]
    if spreads:
        name, most = max(spreads.items(), key=lambda kv: float(kv[1]["max_spread"]))
        parts.append(f"widest spread {name} {most['max_spread']:.0%} ({most['widest']})")
    if soak.stopped_in is not None:
        parts.append(f"stopped in round {soak.stopped_in} ({results.run.status})")
    clock = _clock_text(telemetry)
    if clock:
        parts.append(clock)
    return Finding(
        id="soak.summary",
        severity="info",
        scope="run",
        message="; ".join(parts),
        evidence={
            "rounds": soak.rounds,
            "completed": soak.completed,
            "round_seconds": soak.round_seconds,
            "drifted": drifted,
            "figures": spreads,
            "telemetry": {
                f"{d.host}/{d.device}": {
                    "rounds": list(d.rounds),
                    "sm_clock_mhz_median": list(d.sm_clock_mhz),
                    "temp_c_max": list(d.temp_c_max),
                }
                for d in telemetry
            },
        },
    )


def _clock_text(telemetry: Sequence[DeviceRounds]) -> str:
    """The GPU whose SM clock fell most from the first round to the last, with its
    temperatures: ``SM clock cuda:0 1980 -> 1755 MHz (-11%), up to 84 C`` ('' without)."""
    drops = []
    for d in telemetry:
        pair = d.first_last(d.sm_clock_mhz)
        if pair is not None and pair[0] > 0:
            drops.append(((pair[1] - pair[0]) / pair[0], d, pair))
    if not drops:
        return ""
    change, d, (first, last) = min(drops, key=lambda x: x[0])
    hottest = max((v for v in d.temp_c_max if v is not None), default=None)
    heat = f", up to {hottest:.0f} C" if hottest is not None else ""
    return f"SM clock {d.device} of {d.host} {first:.0f} -> {last:.0f} MHz ({change:+.0%}){heat}"
