"""Checkpoint figure: save and load bandwidth per format (torch.save, safetensors, DCP), the
seconds of one save and load in the hover."""

from __future__ import annotations

from clusterbench.benchmarks.checkpoint import CheckpointMetrics as _C
from clusterbench.metrics import Metric
from clusterbench.report.cells import Grid, format_bytes, format_value
from clusterbench.report.figures._common import (
    DIRECTION_COLORS,
    Spread,
    axis,
    bar_trace,
    color,
    figure,
    layout,
    median_note,
    spreads_by,
)
from clusterbench.report.plots import Plot, PlotContext
from clusterbench.schema import Measurement

__all__ = ["figures"]

_UNIT = "GB/s"


def _format(m: Measurement) -> str:
    ranks = m.params.get("num_ranks")
    return f"{m.params.get('format')}" + (f" ({ranks} ranks)" if ranks else "")


def figures(ms: list[Measurement], ctx: PlotContext) -> list[Plot]:
    rates: dict[str, dict[str, Spread]] = {}
    times: dict[str, dict[str, Spread]] = {}
    for kind, rate, secs in (("save", _C.save_gbps, _C.save_s), ("load", _C.load_gbps, _C.load_s)):
        cells = _by_format(ms, rate)
        if cells:
            rates[kind], times[kind] = cells, _by_format(ms, secs)
    if not rates:
        return []
    data = []
    for kind, cells in rates.items():
        hover = {fmt: _hover(fmt, s, times[kind].get(fmt)) for fmt, s in cells.items()}
        data.append(
            bar_trace(
                kind,
                cells,
                unit=_UNIT,
                color_=color(kind, DIRECTION_COLORS),
                multi_host=ctx.multi_host,
                hover_extra=hover,
            )
        )
    fig = figure(
        data,
        layout(
            x=axis("checkpoint format", type="category"),
            y=axis(f"bandwidth ({_UNIT})", rangemode="tozero"),
            barmode="group",
        ),
    )
    formats = list(dict.fromkeys(fmt for cells in rates.values() for fmt in cells))
    rows = [
        (fmt, *(_cell(rates, times, kind, fmt) for kind in ("save", "load"))) for fmt in formats
    ]
    header = ("format", f"save {_UNIT} (s)", f"load {_UNIT} (s)")
    table = Grid(title=f"checkpoint save and load, {_UNIT} (seconds)", header=header, rows=rows)
    notes = ["Saves are made durable (fsync); loads read with the page cache dropped first."]
    notes += median_note([s for cells in rates.values() for s in cells.values()], "rank")
    return [Plot("Checkpoint save and load bandwidth", fig, table=table, notes=notes)]


def _by_format(ms: list[Measurement], metric: Metric) -> dict[str, Spread]:
    return spreads_by(metric.select(ms), _format)


def _hover(fmt: str, rate: Spread, secs: Spread | None) -> str:
    size = rate.mid.params.get("size_bytes")
    parts = [f"{format_bytes(size)} checkpoint" if isinstance(size, int) else ""]
    if secs is not None:
        parts.append(f"{format_value(secs.mid.value)} s")
    return ", ".join(p for p in parts if p)


def _cell(
    rates: dict[str, dict[str, Spread]], times: dict[str, dict[str, Spread]], kind: str, fmt: str
) -> str:
    rate = rates.get(kind, {}).get(fmt)
    if rate is None:
        return "-"
    secs = times.get(kind, {}).get(fmt)
    return format_value(rate.mid.value) + (f" ({secs.mid.value:.3g})" if secs else "")
