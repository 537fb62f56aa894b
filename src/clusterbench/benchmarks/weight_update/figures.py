"""Weight-update figures: GB/s of each optimizer, one bar per layout, against the HBM spec."""

from __future__ import annotations

from clusterbench.benchmarks.weight_update import WeightUpdateMetrics
from clusterbench.schema import Measurement
from clusterbench.views.cells import Grid, format_value
from clusterbench.views.figures import (
    DTYPE_COLORS,
    Spread,
    axis,
    bar_trace,
    color,
    figure,
    layout,
    median_note,
    reference_lines,
    spreads_by,
)
from clusterbench.views.plots import Plot, PlotContext

__all__ = ["figures"]

_UNIT = "GB/s"
LAYOUT_COLORS = {
    "fp32": DTYPE_COLORS["fp32"],
    "bf16_master": DTYPE_COLORS["bf16"],
    "fp16_master": DTYPE_COLORS["fp16"],
}
_NOTE = (
    "GB/s counts the bytes the update must move (docs/reference.md, weight update); foreach "
    "and for-loop steps move more, so theirs is an effective rate.  The run's measured HBM "
    "figure is the memory benchmark's copy: the findings give each layout's share of it."
)


Times = dict[tuple[str, str, str, str], float]
"""(optimizer, layout, host, device) -> that device's update time, ms."""


def figures(ms: list[Measurement], ctx: PlotContext) -> list[Plot]:
    bandwidth = WeightUpdateMetrics.bandwidth.select(ms)
    if not bandwidth:
        return []
    times: Times = {
        (str(m.params.get("optimizer")), str(m.params.get("layout")), m.host, m.device): m.value
        for m in WeightUpdateMetrics.step_time_ms.select(ms)
    }
    layouts = list(dict.fromkeys(str(m.params.get("layout")) for m in bandwidth))
    cells_by_layout: dict[str, dict[str, Spread]] = {
        lay: spreads_by(
            (m for m in bandwidth if m.params.get("layout") == lay),
            lambda m: str(m.params.get("optimizer")),
        )
        for lay in layouts
    }
    data = [
        bar_trace(
            lay, cells, unit=_UNIT, color_=color(lay, LAYOUT_COLORS), multi_host=ctx.multi_host,
            hover_extra={o: _hover(s, _time(times, o, lay, s)) for o, s in cells.items()},
        )
        for lay, cells in cells_by_layout.items()
    ]  # fmt: skip
    spreads = [s for cells in cells_by_layout.values() for s in cells.values()]
    data += reference_lines(spreads, unit=_UNIT, what="HBM")
    fig = figure(
        data,
        layout(
            x=axis("optimizer", type="category"),
            y=axis(f"bandwidth ({_UNIT})", rangemode="tozero"),
            barmode="group",
        ),
    )
    rows = [
        _row(o, lay, s, _time(times, o, lay, s))
        for lay, cells in cells_by_layout.items()
        for o, s in cells.items()
    ]
    header = ("optimizer", "layout", _UNIT, "update ms", "B/param", "% of spec", "devices")
    table = Grid(title=f"weight update bandwidth, {_UNIT}", header=header, rows=rows)
    title = f"Weight update bandwidth ({bandwidth[0].params.get('model')})"
    return [Plot(title, fig, table=table, notes=[*median_note(spreads), _NOTE])]


def _time(times: Times, optimizer: str, layout: str, s: Spread) -> float | None:
    """The update time of the device whose GB/s is drawn."""
    return times.get((optimizer, layout, s.mid.host, s.mid.device))


def _hover(s: Spread, t: float | None) -> str:
    step = f", update {format_value(t)} ms" if t is not None else ""
    return f"{s.mid.params.get('bytes_per_param')} B/param{step}"


def _row(optimizer: str, layout: str, s: Spread, t: float | None) -> tuple[str, ...]:
    ref = s.mid.reference
    return (
        optimizer,
        layout,
        format_value(s.mid.value),
        format_value(t) if t is not None else "-",
        str(s.mid.params.get("bytes_per_param")),
        f"{s.mid.value / ref.value:.0%}" if ref and ref.value > 0 else "-",
        str(s.count),
    )
