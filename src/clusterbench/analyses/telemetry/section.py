"""The telemetry part of the summary: per benchmark, its GPUs' median SM clock, power against
the limit, hottest temperature and the limiting clocks-event reasons seen, over the
benchmark's windows (one line a benchmark, however many GPUs)."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from clusterbench.hardware.gpu_telemetry import LIMITING_REASONS
from clusterbench.schema import Results, TelemetrySummary, TelemetryWindow
from clusterbench.views.cells import Grid, Section, format_value

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = ["NAME", "section"]

NAME = "telemetry"
_HEADER = ("benchmark", "devices", "SM clock median", "power median", "power limit",
           "temp max", "limiting reasons (share of samples)")  # fmt: skip


def _span(values: list[float]) -> str:
    """``1,590`` for one value (or all equal), ``1,590-1,980`` over devices."""
    if not values:
        return "-"
    low, high = min(values), max(values)
    return format_value(low) if low == high else f"{format_value(low)}-{format_value(high)}"


def _reasons(summaries: list[TelemetrySummary]) -> str:
    """Each limiting reason seen, with its largest share over the devices."""
    worst: dict[str, float] = defaultdict(float)
    for s in summaries:
        for name, share in s.reasons.items():
            if name in LIMITING_REASONS:
                worst[name] = max(worst[name], share)
    ranked = sorted(worst.items(), key=lambda item: -item[1])
    return ", ".join(f"{name} {share:.0%}" for name, share in ranked) or "none"


def section(results: Results, run: RunView) -> Section | None:
    """None when the run sampled no telemetry (the telemetry run part's ``run.part``)."""
    windows: dict[str, list[TelemetryWindow]] = defaultdict(list)
    for w in run.part(NAME).summarised:
        windows[w.benchmark].append(w)
    if not windows:
        return None
    rows = [_row(benchmark, ws) for benchmark, ws in windows.items()]
    grid = Grid(title="GPU telemetry per benchmark (over its GPUs)", header=_HEADER, rows=rows)
    return Section(NAME, grids=[grid])


def _row(benchmark: str, windows: list[TelemetryWindow]) -> tuple[str, ...]:
    summaries = [w.summary for w in windows if w.summary is not None]

    def values(field: str) -> list[float]:
        return [v for s in summaries if (v := getattr(s, field)) is not None]

    return (
        benchmark,
        str(len({(w.host, w.device) for w in windows})),
        _span(values("sm_clock_mhz_median")) + " MHz",
        _span(values("power_w_median")) + " W",
        _span(values("power_limit_w")) + " W",
        _span(values("temp_c_max")) + " °C",
        _reasons(summaries),
    )
