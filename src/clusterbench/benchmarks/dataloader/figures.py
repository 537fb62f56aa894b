"""Dataloader figure: the loader sweep of each dataset as a small heatmap of samples/s, worker
count by prefetch factor (one panel per pin_memory setting tried), the best cell outlined."""

from __future__ import annotations

from typing import Any

from clusterbench.benchmarks.dataloader import DataloaderMetrics
from clusterbench.schema import Measurement
from clusterbench.views.cells import Grid, format_value, where
from clusterbench.views.figures import (
    MARK_COLOR,
    Spread,
    Trace,
    axis,
    figure,
    heatmap,
    heatmap_layout,
    spread_note,
    spreads_by,
)
from clusterbench.views.plots import Plot, PlotContext

__all__ = ["figures"]

Cells = dict[tuple[bool, int, str], Spread]
"""(pin_memory, num_workers, prefetch_factor) -> the loader rate of that setting."""
_NO_PREFETCH = "none"
"""The prefetch column of num_workers=0 (the DataLoader takes no prefetch_factor then)."""
_UNIT = "samples/s"


def _prefetch(m: Measurement) -> str:
    pf = m.params.get("prefetch_factor")
    return _NO_PREFETCH if pf is None else str(pf)


def _workers(m: Measurement) -> int:
    n = m.params.get("num_workers")
    return n if isinstance(n, int) else 0


def figures(ms: list[Measurement], ctx: PlotContext) -> list[Plot]:
    loaders = DataloaderMetrics.loader_samples_per_s.select(ms)
    datasets = list(dict.fromkeys(str(m.params.get("dataset")) for m in loaders))
    return [_sweep([m for m in loaders if m.params.get("dataset") == d], d, ctx) for d in datasets]


def _sweep(ms: list[Measurement], dataset: str, ctx: PlotContext) -> Plot:
    cells: Cells = spreads_by(
        ms, lambda m: (bool(m.params.get("pin_memory")), _workers(m), _prefetch(m))
    )
    pins = sorted({pin for pin, _, _ in cells})
    workers = [str(n) for n in sorted({n for _, n, _ in cells})]
    prefetch = sorted({pf for _, _, pf in cells}, key=lambda p: (p != _NO_PREFETCH, _num(p)))
    data, panel_layout = _panels(cells, pins=pins, workers=workers, prefetch=prefetch, ctx=ctx)
    fig_layout = heatmap_layout(
        row_title="num_workers (loader processes)",
        column_title="",
        num_rows=len(workers),
        num_columns=len(prefetch),
    )
    fig_layout.update(panel_layout)
    fig_layout["coloraxis"] = {
        "colorscale": "Viridis",
        "colorbar": {"title": {"text": f"loader ({_UNIT})"}},
    }
    best_key = max(cells, key=lambda k: cells[k].mid.value)
    fig_layout["shapes"] = [_outline(best_key, pins=pins, workers=workers, prefetch=prefetch)]
    fig_layout["height"] = min(fig_layout["height"], 360)
    pin, n, pf = best_key
    notes = [
        f"Outlined: the fastest setting, num_workers={n}, prefetch_factor={pf}, pin_memory={pin}"
        f" ({format_value(cells[best_key].mid.value)} {_UNIT})."
    ]
    if max(s.count for s in cells.values()) > 1:
        count = max(s.count for s in cells.values())
        notes.append(f"Each cell is the median of {count} devices (hover: min and max).")
    rows: list[tuple[str, ...]] = [
        (str(n), pf, str(p), format_value(s.mid.value), str(s.count))
        for (p, n, pf), s in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1]))
    ]
    header = ("num_workers", "prefetch_factor", "pin_memory", _UNIT, "devices")
    table = Grid(title=f"DataLoader sweep, {dataset}, {_UNIT}", header=header, rows=rows)
    return Plot(f"DataLoader sweep: {dataset}", figure(data, fig_layout), table=table, notes=notes)


def _panels(
    cells: Cells, *, pins: list[bool], workers: list[str], prefetch: list[str], ctx: PlotContext
) -> tuple[list[Trace], dict[str, Any]]:
    """One heatmap per pin_memory setting, side by side on one colour scale, and their x axes."""
    data: list[Trace] = []
    panel_layout: dict[str, Any] = {}
    for i, pin in enumerate(pins):
        values = {(str(n), pf): s for (p, n, pf), s in cells.items() if p == pin}
        trace = heatmap(
            rows=workers,
            columns=prefetch,
            cells={k: s.mid.value for k, s in values.items()},
            unit=_UNIT,
            what="loader",
            row_title="num_workers",
            column_title="prefetch_factor",
            notes={k: _note(s, ctx) for k, s in values.items()},
            separator=", ",
        )
        trace.update(coloraxis="coloraxis", xaxis=_ref("x", i), yaxis="y")
        trace.pop("colorbar")
        data.append(trace)
        domain = [i / len(pins) + (0.04 if i else 0), (i + 1) / len(pins) - 0.04]
        title = f"prefetch_factor, {'pinned' if pin else 'pageable'} (batches/worker)"
        panel_layout[_ref("xaxis", i)] = axis(
            title, type="category", showgrid=False, domain=domain, anchor="y"
        )
    return data, panel_layout


def _num(pf: str) -> int:
    return int(pf) if pf.isdigit() else 0


def _ref(base: str, i: int) -> str:
    return base if i == 0 else f"{base}{i + 1}"


def _note(s: Spread, ctx: PlotContext) -> str:
    return spread_note(s, _UNIT, lambda m: where(m, ctx.multi_host))


def _outline(
    key: tuple[bool, int, str], *, pins: list[bool], workers: list[str], prefetch: list[str]
) -> dict[str, Any]:
    pin, n, pf = key
    i, j = workers.index(str(n)), prefetch.index(pf)
    return {
        "type": "rect",
        "xref": _ref("x", pins.index(pin)),
        "yref": "y",
        "x0": j - 0.5,
        "x1": j + 0.5,
        "y0": i - 0.5,
        "y1": i + 0.5,
        "line": {"color": MARK_COLOR, "width": 2.5},
    }
