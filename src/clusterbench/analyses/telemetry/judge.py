"""Findings from the GPUs' telemetry: what held a GPU's clocks down while a figure was measured
(``telemetry.throttled``), and GPUs that ran close to their own slowdown temperature
(``telemetry.hot``).

Pure over the results: each measurement's own telemetry summary (its window: from the previous
record of its benchmark on its rank to the moment it was recorded) and, for a benchmark whose
measurements' windows hold too few samples, the benchmark's window on that rank.

The software power cap is ``info``: a GPU at its power limit runs in its design envelope, and
the finding explains the figure (a bf16 GEMM at 1,590 MHz instead of 1,980) rather than a
fault.  Hardware slowdown, thermal slowdown and the power brake are ``warn``: the board, its
cooling or its power supply hold the GPU below what the work asks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterbench.hardware.gpu_telemetry import LIMITING_REASONS
from clusterbench.schema import Finding, Measurement, Results, TelemetrySummary, TelemetryWindow
from clusterbench.thresholds import Thresholds

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = ["MIN_SAMPLES", "CountedWindow", "TelemetryAnalysis", "findings", "telemetry_analysis"]

MIN_SAMPLES = 3
"""A window of fewer samples says nothing of a share (one sample of two is 50%)."""
_POWER_CAP = "SW power cap"
_WORDS = {
    "SW power cap": "the software power cap",
    "HW slowdown": "hardware slowdown",
    "SW thermal slowdown": "software thermal slowdown",
    "HW thermal slowdown": "hardware thermal slowdown",
    "HW power brake slowdown": "the hardware power brake",
}
_THERMAL = frozenset({"SW thermal slowdown", "HW thermal slowdown"})
_POWER = frozenset({_POWER_CAP, "HW power brake slowdown"})


@dataclass(frozen=True, slots=True)
class CountedWindow:
    """A window that counts: a measurement's with enough samples, else its benchmark's."""

    benchmark: str
    what: str
    """The measurement (benchmark, metric, params), or the benchmark as a whole."""
    host: str
    device: str
    summary: TelemetrySummary
    measurement: Measurement | None


@dataclass(frozen=True, slots=True)
class _Hit:
    """A window that saw a limiting reason in ``fraction`` of its samples."""

    window: CountedWindow
    fraction: float


@dataclass(frozen=True, slots=True)
class TelemetryAnalysis:
    """The telemetry run part's analysis of the run: what its findings and section read."""

    counted: tuple[CountedWindow, ...]
    """The windows that count for throttling (:func:`_windows`)."""
    summarised: tuple[TelemetryWindow, ...]
    """The benchmarks' windows that sampled telemetry, in the run's order."""


def telemetry_analysis(results: Results, run: RunView) -> TelemetryAnalysis:
    return TelemetryAnalysis(
        counted=tuple(_windows(results)),
        summarised=tuple(w for w in results.telemetry if w.summary is not None),
    )


def findings(results: Results, run: RunView) -> list[Finding]:
    """Throttled and hot GPUs, from the telemetry run part's analysis (``run.part``)."""
    thresholds, analysed = run.thresholds, run.part("telemetry")
    return [*_throttled(analysed.counted, thresholds), *_hot(analysed.summarised, thresholds)]


def _label(m: Measurement) -> str:
    params = ", ".join(f"{k}={v}" for k, v in m.params.items())
    return f"{m.benchmark} {m.metric}" + (f" ({params})" if params else "")


def _windows(results: Results) -> Iterable[CountedWindow]:
    """Every measurement's window with enough samples; for a benchmark that has none such on a
    rank, the benchmark's own window there."""
    covered: set[tuple[str, int]] = set()
    for m in results.measurements:
        if m.telemetry is not None and m.telemetry.samples >= MIN_SAMPLES:
            covered.add((m.benchmark, m.rank))
            yield CountedWindow(m.benchmark, _label(m), m.host, m.device, m.telemetry, m)
    for w in results.telemetry:
        if (w.benchmark, w.rank) in covered or w.summary is None:
            continue
        if w.summary.samples >= MIN_SAMPLES:
            what = f"{w.benchmark} (the whole benchmark)"
            yield CountedWindow(w.benchmark, what, w.host, w.device, w.summary, None)


def _throttled(counted: Iterable[CountedWindow], thresholds: Thresholds) -> list[Finding]:
    hits: dict[tuple[str, str], list[_Hit]] = defaultdict(list)
    limit = thresholds.telemetry_throttle_min_fraction
    for window in counted:
        for reason, fraction in window.summary.reasons.items():
            if reason in LIMITING_REASONS and fraction >= limit:
                hits[window.benchmark, reason].append(_Hit(window, fraction))
    return [_throttle_finding(bench, reason, group) for (bench, reason), group in hits.items()]


def _below(s: TelemetrySummary) -> str:
    """How far the median clock stayed below the maximum: a reason whose bit is set while the
    clock holds within 2% of its maximum cost little (the bit is set at the limit)."""
    if not s.sm_clock_max_mhz or s.sm_clock_mhz_median is None:
        return ""
    below = 1.0 - s.sm_clock_mhz_median / s.sm_clock_max_mhz
    if below <= 0.02:
        return f", within {max(below, 0.0):.0%} of it: this cost little clock"
    return f", {below:.0%} below it"


def _mhz(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} MHz"


def _throttle_finding(benchmark: str, reason: str, group: list[_Hit]) -> Finding:
    """One finding for the benchmark and reason, naming the window that saw it most (at the
    lowest clock among equals)."""
    hit = max(group, key=lambda h: (h.fraction, -(h.window.summary.sm_clock_mhz_median or 0.0)))
    worst, s = hit.window, hit.window.summary
    devices = sorted({(h.window.host, h.window.device) for h in group})
    clock = f"{_mhz(s.sm_clock_mhz_median)} median"
    if s.sm_clock_max_mhz:
        clock += f" (the GPU's maximum {_mhz(s.sm_clock_max_mhz)}{_below(s)})"
    under, detail = _WORDS[reason], f"up to {s.temp_c_max:.0f} °C" if s.temp_c_max else ""
    if reason in _POWER:
        under += f" ({_w(s.power_limit_w)})" if s.power_limit_w else ""
        detail = f"power {_w(s.power_w_median)} median against the {_w(s.power_limit_w)} limit"
    where = worst.device if len(devices) == 1 else f"{worst.host}/{worst.device}"
    others = f"; {len(group)} windows on {len(devices)} devices saw it" if len(group) > 1 else ""
    message = (
        f"{worst.what} ran at {clock} under {under} in {hit.fraction:.0%} of its samples on "
        f"{where}" + (f", {detail}" if detail else "") + others
    )
    return Finding(
        id="telemetry.throttled",
        severity="info" if reason == _POWER_CAP else "warn",
        scope=f"host:{worst.host}/{worst.device}" if len(devices) == 1 else "run",
        message=message,
        evidence={
            "benchmark": benchmark,
            "reason": reason,
            "fraction": hit.fraction,
            "measurement": _about(worst.measurement),
            "host": worst.host,
            "device": worst.device,
            **s.model_dump(include=_EVIDENCE, exclude_none=True),
            "devices": [f"{host}/{device}" for host, device in devices],
            "windows": len(group),
        },
        fix=_fix(reason, worst.device),
    )


_EVIDENCE = {
    "samples",
    "window_s",
    "sm_clock_mhz_median",
    "sm_clock_mhz_min",
    "sm_clock_max_mhz",
    "power_w_median",
    "power_w_max",
    "power_limit_w",
    "temp_c_max",
    "temp_slowdown_c",
}


def _w(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} W"


def _about(m: Measurement | None) -> dict[str, object] | None:
    if m is None:
        return None
    return {"metric": m.metric, "params": m.params, "value": m.value, "unit": m.unit,
            "rank": m.rank}  # fmt: skip


def _fix(reason: str, device: str) -> str:
    index = device.partition(":")[2] or "0"
    if reason == _POWER_CAP:
        return (
            f"the GPU ran at its power limit, so the figure is power-bound: nvidia-smi -q -d "
            f"POWER,PERFORMANCE -i {index} shows the enforced and the default limit (a limit "
            "set below the default costs clocks); compare figures at the same warm-up and limit"
        )
    if reason in _THERMAL:
        return (
            f"check the GPU's cooling (airflow, fans, inlet temperature, a blocked heat sink): "
            f"nvidia-smi -q -d TEMPERATURE,PERFORMANCE -i {index}; then rerun"
        )
    return (
        "the board or the system asserts it, not the work: check the power supplies and the "
        f"BMC's event log (ipmitool sel list), nvidia-smi -q -d PERFORMANCE -i {index}; drain "
        "the node if it persists"
    )


def _hot(summarised: Iterable[TelemetryWindow], thresholds: Thresholds) -> list[Finding]:
    """Per device, its hottest benchmark window within the margin of its slowdown temperature."""
    hottest: dict[tuple[str, str], tuple[float, str, TelemetrySummary]] = {}
    for w in summarised:
        s = w.summary
        if s is None or s.temp_c_max is None or s.temp_slowdown_c is None:
            continue
        if s.temp_c_max < s.temp_slowdown_c - thresholds.telemetry_hot_margin_c:
            continue
        key = (w.host, w.device)
        if key not in hottest or s.temp_c_max > hottest[key][0]:
            hottest[key] = (s.temp_c_max, w.benchmark, s)
    out = []
    for (host, device), (temp, benchmark, s) in sorted(hottest.items()):
        assert s.temp_slowdown_c is not None
        out.append(
            Finding(
                id="telemetry.hot",
                severity="warn",
                scope=f"host:{host}/{device}",
                message=f"{device} reached {temp:.0f} °C during {benchmark}, within "
                f"{thresholds.telemetry_hot_margin_c:g} °C of its slowdown temperature "
                f"({s.temp_slowdown_c:.0f} °C)",
                evidence={
                    "benchmark": benchmark,
                    "temp_c_max": temp,
                    "temp_slowdown_c": s.temp_slowdown_c,
                    "sm_clock_mhz_median": s.sm_clock_mhz_median,
                },
                fix=_fix("HW thermal slowdown", device),
            )
        )
    return out
