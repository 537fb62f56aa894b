"""Memory figures: device memory bandwidth per operation against the HBM spec."""

from __future__ import annotations

from clusterbench.benchmarks.memory import MemoryMetrics
from clusterbench.schema import Measurement
from clusterbench.views.cells import Grid, format_bytes, format_value
from clusterbench.views.figures import (
    axis,
    bar_trace,
    figure,
    layout,
    median_note,
    reference_lines,
    spreads_by,
)
from clusterbench.views.plots import Plot, PlotContext

__all__ = ["figures"]

_UNIT = "GB/s"
_COLOR = "#009E73"


def figures(ms: list[Measurement], ctx: PlotContext) -> list[Plot]:
    cells = spreads_by(MemoryMetrics.bandwidth.select(ms), lambda m: str(m.params.get("op")))
    if not cells:
        return []
    sizes = {
        op: format_bytes(size)
        for op, s in cells.items()
        if isinstance(size := s.mid.params.get("size_bytes"), int)
    }
    hover = {op: f"buffer {size}" for op, size in sizes.items()}
    data = [
        bar_trace(
            "device memory",
            cells,
            unit=_UNIT,
            color_=_COLOR,
            multi_host=ctx.multi_host,
            hover_extra=hover,
        ),
        *reference_lines(cells.values(), unit=_UNIT, what="HBM"),
    ]
    fig = figure(
        data,
        layout(
            x=axis("operation", type="category"),
            y=axis(f"bandwidth ({_UNIT})", rangemode="tozero"),
        ),
    )
    rows: list[tuple[str, ...]] = [
        (
            op,
            format_value(s.mid.value),
            format_value(s.mid.reference.value) if s.mid.reference else "-",
            f"{s.mid.value / s.mid.reference.value:.0%}" if s.mid.reference else "-",
            str(s.count),
            sizes.get(op, "-"),
        )
        for op, s in cells.items()
    ]
    header = ("operation", _UNIT, "spec", "% of spec", "devices", "buffer")
    table = Grid(title=f"device memory bandwidth, {_UNIT}", header=header, rows=rows)
    notes = median_note(cells.values())
    return [Plot("Device memory bandwidth", fig, table=table, notes=notes)]
