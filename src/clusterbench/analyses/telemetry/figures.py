"""The telemetry figure under each benchmark: SM clock, power against its limit and temperature
over the benchmark's window on each GPU, drawn from the ranks' CSV series in the run folder
(the report is built where the run folder is), with the samples where a limiting clocks-event
reason was active marked on the clock."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterbench.hardware.gpu_telemetry import LIMITING_REASONS, reason_names
from clusterbench.runtime.telemetry import Sample, read_series
from clusterbench.schema import Results, TelemetrySummary, TelemetryWindow
from clusterbench.views.cells import Grid, format_value
from clusterbench.views.figures import MARK_COLOR, Trace, axis, figure, layout
from clusterbench.views.plots import Plot

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = ["MAX_DEVICES", "benchmarks_with_telemetry", "by_benchmark", "figures"]

MAX_DEVICES = 8
"""Devices drawn in one figure; the table lists every one."""
_PANELS = (  # column, axis, title, unit, domain
    ("sm_clock_mhz", "y", "SM clock", "MHz", [0.56, 1.0]),
    ("power_w", "y2", "power", "W", [0.28, 0.50]),
    ("temp_c", "y3", "temperature", "°C", [0.0, 0.22]),
)
# Okabe & Ito's palette without its yellow, which thin lines on white do not show.
_DEVICE_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#000000", "#7F7F7F",
                  "#D55E00")  # fmt: skip
_HEADER = ("device", "samples", "SM clock median", "SM clock min", "power median", "power max",
           "power limit", "temp max", "limiting reasons")  # fmt: skip


def benchmarks_with_telemetry(results: Results) -> list[str]:
    return list(dict.fromkeys(w.benchmark for w in results.telemetry))


def _latest(windows: Sequence[TelemetryWindow]) -> list[TelemetryWindow]:
    """Each device's last window of the benchmark (a soak's last round), in rank order."""
    last: dict[int, TelemetryWindow] = {}
    for w in windows:
        if w.rank not in last or w.start > last[w.rank].start:
            last[w.rank] = w
    return [last[r] for r in sorted(last)]


def figures(results: Results, benchmark: str, run_dir: Path | None) -> list[Plot]:
    """``benchmark``'s telemetry figure, or a note saying why none is drawn; nothing for a
    benchmark too short for a sample on any GPU (its rank's CSV holds none in its window)."""
    windows = _latest([w for w in results.telemetry if w.benchmark == benchmark])
    if not any(w.summary is not None for w in windows):
        return []
    multi_host = len({w.host for w in windows}) > 1
    table = Grid(
        title=f"{benchmark}: GPU telemetry over the benchmark (MHz, W, °C)",
        header=_HEADER,
        rows=[_row(w, multi_host=multi_host) for w in windows],
    )
    title = f"{benchmark}: GPU telemetry"
    series = _series(windows, run_dir)
    drawn = [w for w in windows if series.get(w.rank)][:MAX_DEVICES]
    if not drawn:  # sampled, yet no series: the CSVs are not beside results.json
        sampled = [w for w in windows if w.summary is not None]
        missing = ", ".join(sorted({w.series or "not kept" for w in sampled}))
        note = f"{title}: no series to draw ({missing} not found in the run folder)"
        return [Plot(title=title, figure={}, table=table, notes=[note])]
    data: list[Trace] = []
    for i, w in enumerate(drawn):
        name = f"{w.host}/{w.device}" if multi_host else w.device
        data += _traces(w, series[w.rank], name=name, line=_DEVICE_COLORS[i % len(_DEVICE_COLORS)])
    data += _limits(drawn)
    notes = [
        "Time from the benchmark's start on each GPU; crosses on the clock: samples where a "
        f"limiting clocks-event reason ({', '.join(sorted(LIMITING_REASONS))}) was active.",
        "Dashed: the enforced power limit.",
    ]
    if len(windows) > len(drawn):
        notes.append(f"{len(drawn)} of {len(windows)} devices drawn; the table lists them all.")
    return [Plot(title=title, figure=figure(data, _layout()), table=table, notes=notes)]


def _series(windows: Sequence[TelemetryWindow], run_dir: Path | None) -> dict[int, list[Sample]]:
    """rank -> its samples inside its window (ranks whose CSV is missing left out)."""
    out: dict[int, list[Sample]] = {}
    if run_dir is None:
        return out
    for w in windows:
        path = Path(run_dir) / w.series if w.series else None
        if path is None or not path.is_file():
            continue
        out[w.rank] = sorted((s for s in read_series(path) if w.start <= s.t <= w.end),
                             key=lambda s: s.t)  # fmt: skip
    return out


def _traces(w: TelemetryWindow, samples: list[Sample], *, name: str, line: str) -> list[Trace]:
    x = [round(s.t - w.start, 3) for s in samples]
    traces: list[Trace] = []
    for column, yaxis, what, unit, _ in _PANELS:
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": name,
                "legendgroup": name,
                "showlegend": yaxis == "y",
                "x": x,
                "y": [s.values.get(column) for s in samples],
                "yaxis": yaxis,
                "line": {"color": line, "width": 1.5},
                "hovertemplate": f"{name}: {what} %{{y:.4g}} {unit} at %{{x:.1f}} s<extra></extra>",
            }
        )
    limited = [(xi, s) for xi, s in zip(x, samples, strict=True) if _limited(s)]
    if limited:
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"{name}: limiting reason",
                "legendgroup": name,
                "x": [xi for xi, _ in limited],
                "y": [s.values.get("sm_clock_mhz") for _, s in limited],
                "text": [", ".join(_reasons(s)) for _, s in limited],
                "marker": {"symbol": "x", "size": 6, "color": MARK_COLOR},
                "hovertemplate": f"{name}: %{{y:.4g}} MHz under %{{text}}<extra></extra>",
            }
        )
    return traces


def _reasons(s: Sample) -> list[str]:
    mask = s.values.get("clocks_event_reasons")
    return [] if mask is None else [n for n in reason_names(int(mask)) if n in LIMITING_REASONS]


def _limited(s: Sample) -> bool:
    return bool(_reasons(s))


def _limits(windows: Sequence[TelemetryWindow]) -> list[Trace]:
    """The power limit as a dashed line over each distinct limit's longest window."""
    spans: dict[float, float] = defaultdict(float)
    for w in windows:
        if w.summary is not None and w.summary.power_limit_w is not None:
            spans[w.summary.power_limit_w] = max(spans[w.summary.power_limit_w], w.end - w.start)
    return [
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"power limit {format_value(limit)} W",
            "x": [0.0, round(span, 3)],
            "y": [limit, limit],
            "yaxis": "y2",
            "line": {"color": MARK_COLOR, "dash": "dash", "width": 1.2},
            "hovertemplate": f"power limit {format_value(limit)} W<extra></extra>",
        }
        for limit, span in spans.items()
    ]


def _layout() -> dict[str, Any]:
    panels = {
        ("yaxis" if yaxis == "y" else f"yaxis{yaxis[1:]}"): axis(
            f"{what} ({unit})", domain=domain, anchor="x"
        )
        for _, yaxis, what, unit, domain in _PANELS
    }
    out = layout(x=axis("time since the benchmark started (s)", anchor="y3"), y=panels.pop("yaxis"))
    return {**out, **panels, "height": 620}


def _row(w: TelemetryWindow, *, multi_host: bool) -> tuple[str, ...]:
    s = w.summary or TelemetrySummary(samples=0, window_s=w.end - w.start)
    reasons = ", ".join(f"{n} {f:.0%}" for n, f in s.reasons.items() if n in LIMITING_REASONS)
    return (
        f"{w.host}/{w.device}" if multi_host else w.device,
        str(s.samples),
        format_value(s.sm_clock_mhz_median),
        format_value(s.sm_clock_mhz_min),
        format_value(s.power_w_median),
        format_value(s.power_w_max),
        format_value(s.power_limit_w),
        format_value(s.temp_c_max),
        reasons or "none",
    )


def by_benchmark(results: Results, run: RunView) -> dict[str, list[Plot]]:
    """Each benchmark with telemetry -> its telemetry figures (after the benchmark's own)."""
    return {
        name: figures(results, name, run.run_dir) for name in benchmarks_with_telemetry(results)
    }
