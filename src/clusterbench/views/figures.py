"""What every benchmark's figures share: colours, axes, layout, heatmaps, marks, and how the
values of several devices become one drawn value that is still a measurement's own."""

from __future__ import annotations

import statistics
import zlib
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from clusterbench.schema import Measurement
from clusterbench.views.cells import format_value, where

__all__ = [
    "CLASS_COLORS",
    "DIRECTION_COLORS",
    "DTYPE_COLORS",
    "MARK_COLOR",
    "OP_COLORS",
    "REFERENCE_COLOR",
    "Spread",
    "Trace",
    "axis",
    "bar_trace",
    "color",
    "error_bars",
    "figure",
    "heatmap",
    "heatmap_layout",
    "layout",
    "mark_cells",
    "mark_node",
    "median_note",
    "reference_line",
    "reference_lines",
    "spread",
    "spread_note",
    "spreads_by",
]

Trace = dict[str, Any]
K = TypeVar("K", bound=Hashable)

# Okabe & Ito's colour-blind-safe palette (Color Universal Design, 2008), then a grey.
_SERIES = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#CC79A7",
    "#56B4E9",
    "#D55E00",
    "#F0E442",
    "#000000",
    "#7F7F7F",
)
DTYPE_COLORS = {
    "fp8": "#D55E00",
    "bf16": "#0072B2",
    "fp16": "#56B4E9",
    "tf32": "#009E73",
    "fp32": "#E69F00",
    "fp64": "#CC79A7",
}
OP_COLORS = {
    "all_reduce": "#0072B2",
    "all_gather": "#009E73",
    "reduce_scatter": "#E69F00",
    "broadcast": "#CC79A7",
    "all_to_all": "#D55E00",
    "send_recv": "#56B4E9",
}
CLASS_COLORS = {
    "compute": "#0072B2",
    "memory": "#56B4E9",
    "communication": "#E69F00",
    "coordination": "#BBBBBB",
}
DIRECTION_COLORS = {"h2d": "#0072B2", "d2h": "#E69F00", "save": "#0072B2", "load": "#E69F00"}
REFERENCE_COLOR = "#444444"
MARK_COLOR = "#C00000"
_BANDWIDTH_SCALE = "Viridis"
_GRID = "#E5E5E5"
_MAX_CELL_TEXT = 144
"""Heatmaps of at most this many cells print each value in its cell (a 12 x 12 matrix)."""


def color(key: str, table: dict[str, str] | None = None) -> str:
    """``key``'s colour in ``table``, else a fixed one from the palette (the same in every
    figure and every run: picked by a checksum of the name, not by order)."""
    if table and key in table:
        return table[key]
    return _SERIES[zlib.crc32(key.encode()) % len(_SERIES)]


# --- one drawn value out of many devices ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Spread:
    """Several devices' (or groups') measurements of the same thing: their median (the value
    the tables show, so a plot and its table agree), the lowest and the highest.  ``mid`` is the
    measurement at the median; of an even count, the lower middle one carrying the median of
    the two middle values (``measured`` False)."""

    mid: Measurement
    low: Measurement
    high: Measurement
    count: int
    measured: bool = True
    """``mid.value`` is one device's own (False: the mean of the two middle ones)."""


def spread(ms: Sequence[Measurement]) -> Spread:
    ordered = sorted(ms, key=lambda m: m.value)
    n = len(ordered)
    mid = ordered[(n - 1) // 2]
    median = statistics.median(m.value for m in ordered)
    if median == mid.value:
        return Spread(mid, ordered[0], ordered[-1], n)
    return Spread(mid.model_copy(update={"value": median}), ordered[0], ordered[-1], n, False)


def spreads_by(ms: Iterable[Measurement], key: Callable[[Measurement], K]) -> dict[K, Spread]:
    """:func:`spread` per ``key(m)``, in first-seen order of the keys."""
    groups: dict[K, list[Measurement]] = {}
    for m in ms:
        groups.setdefault(key(m), []).append(m)
    return {k: spread(group) for k, group in groups.items()}


def error_bars(spreads: Sequence[Spread]) -> dict[str, Any] | None:
    """Lowest to highest around each drawn value; None when each has one member."""
    if all(s.count == 1 for s in spreads):
        return None
    return {
        "type": "data",
        "symmetric": False,
        "array": [s.high.value - s.mid.value for s in spreads],
        "arrayminus": [s.mid.value - s.low.value for s in spreads],
        "color": REFERENCE_COLOR,
        "thickness": 1,
        "width": 3,
    }


def spread_note(s: Spread, unit: str, label: Callable[[Measurement], str]) -> str:
    """The hover line of a drawn value of several members: which one it is and the range."""
    if s.count == 1:
        return label(s.mid)
    median = f"median of {s.count}: {label(s.mid)}" if s.measured else f"median of {s.count}"
    return (
        f"{median}; min {format_value(s.low.value)} {unit} "
        f"({label(s.low)}), max {format_value(s.high.value)} {unit} ({label(s.high)})"
    )


# --- layout -----------------------------------------------------------------------------------


def axis(title: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title},
        "gridcolor": _GRID,
        "zeroline": False,
        "automargin": True,  # room for long or tilted tick labels under the title
        **extra,
    }


def layout(*, x: dict[str, Any], y: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The common layout: white, legend above the plot, hover per point; plotly's toolbar
    (shown on hover) stands upright in the right margin, not across the legend above."""
    return {
        "xaxis": x,
        "yaxis": y,
        "paper_bgcolor": "#FFFFFF",
        "plot_bgcolor": "#FFFFFF",
        "font": {"family": "system-ui, sans-serif", "size": 12},
        "margin": {"l": 70, "r": 40, "t": 50, "b": 60},
        "legend": {"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
        "modebar": {"orientation": "v"},
        "hovermode": "closest",
        "height": 420,
        **extra,
    }


_ACROSS = "x9"
"""A hidden x axis over the whole plot width, 0 to 1: lines across a category axis."""
_ACROSS_POINTS = [i / 20 for i in range(21)]


def figure(data: list[Trace], fig_layout: dict[str, Any]) -> dict[str, Any]:
    """The figure; with the hidden axis that lines across the plot are drawn on, if any is."""
    if any(trace.get("xaxis") == _ACROSS for trace in data):
        fig_layout.setdefault(
            "xaxis9", {"overlaying": "x", "visible": False, "range": [0, 1], "fixedrange": True}
        )
    return {"data": data, "layout": fig_layout}


def reference_line(
    x: Sequence[Any] | None,
    value: float,
    *,
    name: str,
    unit: str,
    color_: str = REFERENCE_COLOR,
) -> Trace:
    """A horizontal dashed line at ``value`` from the first to the last of the positions ``x``
    or, with ``x`` None, across the whole plot (for category axes); with a legend entry and a
    hover naming it."""
    trace: Trace = {
        "type": "scatter",
        "meta": "reference",
        "mode": "lines",
        "x": list(x) if x is not None else _ACROSS_POINTS,
        "name": name,
        "line": {"color": color_, "dash": "dash", "width": 1.5},
        "hovertemplate": f"{name}: %{{y:.4g}} {unit}<extra></extra>",
    }
    trace["y"] = [value] * len(trace["x"])
    if x is None:
        trace["xaxis"] = _ACROSS
    return trace


# --- heatmaps ---------------------------------------------------------------------------------


def heatmap(
    *,
    rows: Sequence[str],
    columns: Sequence[str],
    cells: dict[tuple[str, str], float],
    unit: str,
    what: str,
    row_title: str,
    column_title: str,
    lower_is_better: bool = False,
    notes: dict[tuple[str, str], str] | None = None,
    reference: float | None = None,
    separator: str = " → ",
) -> Trace:
    """One heatmap trace, ``cells[(row, column)]`` its values (missing cells empty); brighter
    is better whatever the unit's direction; values printed in the cells of small matrices."""
    z = [[cells.get((r, c)) for c in columns] for r in rows]
    trace: Trace = {
        "type": "heatmap",
        "meta": "measurement",
        "x": list(columns),
        "y": list(rows),
        "z": z,
        "colorscale": _BANDWIDTH_SCALE,
        "reversescale": lower_is_better,
        "colorbar": {"title": {"text": f"{what} ({unit})"}},
        "hoverongaps": False,
        "hovertemplate": (
            f"{row_title} %{{y}}{separator}{column_title} %{{x}}<br>{what} %{{z:.4g}} {unit}"
            + ("<br>%{customdata}" if notes else "")
            + "<extra></extra>"
        ),
    }
    if reference:
        trace.update(zmin=0.0, zmax=max(reference, *(v for v in cells.values())))
    if notes:
        trace["customdata"] = [[notes.get((r, c), "") for c in columns] for r in rows]
    if len(rows) * len(columns) <= _MAX_CELL_TEXT:
        large = all(abs(v) >= 100 for v in cells.values())  # 1,246 rather than 1.25e+03
        trace["texttemplate"] = "%{z:,.0f}" if large else "%{z:.3g}"
    return trace


def heatmap_layout(
    *, row_title: str, column_title: str, num_rows: int, num_columns: int, **extra: Any
) -> dict[str, Any]:
    """Categorical axes, the first row at the top (as in a table), about square cells."""
    height = min(900, max(320, 120 + 28 * num_rows))
    return layout(
        x=axis(
            column_title, type="category", showgrid=False, tickangle=-45 if num_columns > 8 else 0
        ),
        y=axis(row_title, type="category", showgrid=False, autorange="reversed"),
        height=height,
        **extra,
    )


def mark_node(node: str, labels: Sequence[str], *, text: str) -> dict[str, list[Any]]:
    """Red outlines round ``node``'s row and column of a heatmap whose rows and columns are
    ``labels``, and one annotation naming it; as ``{"shapes": [...], "annotations": [...]}``
    to merge into the layout."""
    i = list(labels).index(node)
    n = len(labels)
    line = {"color": MARK_COLOR, "width": 2.5}
    band = {"type": "rect", "xref": "x", "yref": "y", "line": line, "fillcolor": "rgba(0,0,0,0)"}
    return {
        "shapes": [
            {**band, "x0": -0.5, "x1": n - 0.5, "y0": i - 0.5, "y1": i + 0.5},
            {**band, "x0": i - 0.5, "x1": i + 0.5, "y0": -0.5, "y1": n - 0.5},
        ],
        "annotations": [
            {
                "x": node,
                "y": labels[0],
                "xref": "x",
                "yref": "y",
                "text": text,
                "showarrow": True,
                "arrowcolor": MARK_COLOR,
                "ax": 0,
                "ay": -34,
                "yshift": 12,
                "font": {"color": MARK_COLOR},
                "bgcolor": "#FFFFFF",
            }
        ],
    }


# --- bars -------------------------------------------------------------------------------------


def bar_trace(
    name: str,
    cells: dict[str, Spread],
    *,
    unit: str,
    color_: str,
    multi_host: bool,
    hover_extra: dict[str, str] | None = None,
) -> Trace:
    """One bar per category, each the median member of its spread (error bar: min to max);
    the hover names the device, the % of its reference and ``hover_extra[category]``."""
    spreads = list(cells.values())

    def line(category: str, s: Spread) -> str:
        ref = s.mid.reference
        share = ""
        if ref is not None and ref.value > 0:
            share = f" ({100 * s.mid.value / ref.value:.0f}% of {_ref_name(ref.kind)})"
        who = spread_note(s, unit, lambda m: where(m, multi_host))
        extra = (hover_extra or {}).get(category, "")
        return share + "<br>" + who + (f"<br>{extra}" if extra else "")

    trace: Trace = {
        "type": "bar",
        "meta": "measurement",
        "name": name,
        "x": list(cells),
        "y": [s.mid.value for s in spreads],
        "marker": {"color": color_},
        "customdata": [line(c, s) for c, s in cells.items()],
        "hovertemplate": f"{name} %{{x}}<br>%{{y:.4g}} {unit}%{{customdata}}<extra></extra>",
    }
    bars = error_bars(spreads)
    if bars is not None:
        trace["error_y"] = bars
    return trace


def reference_lines(spreads: Iterable[Spread], *, unit: str, what: str) -> list[Trace]:
    """A dashed line across the plot per distinct reference of the drawn measurements (one in a
    run of one GPU model), named by its kind: "HBM spec 4800 GB/s", "PCIe link rate 63 GB/s"."""
    refs = {
        (ref.kind, ref.value)
        for s in spreads
        if (ref := s.mid.reference) is not None and ref.value > 0
    }
    return [
        reference_line(
            None,
            value,
            name=f"{what} {_ref_name(kind)} {format_value(value)} {unit}",
            unit=unit,
        )
        for kind, value in sorted(refs)
    ]


_REF_NAMES = {"spec_peak": "spec", "link_rate": "link rate", "achievable": "achievable"}


def _ref_name(kind: str) -> str:
    return _REF_NAMES.get(kind, kind.replace("_", " "))


def median_note(spreads: Iterable[Spread], what: str = "device") -> list[str]:
    """The note under a figure whose values are median members: [] when each had one."""
    count = max((s.count for s in spreads), default=1)
    if count <= 1:
        return []
    return [
        f"Each value is the median of {count} ({what}s; of an even count, the mean of the two "
        "middle ones, as in the tables); the error bar spans the lowest to the highest."
    ]


def mark_cells(pairs: Iterable[tuple[str, str]], labels: Sequence[str]) -> list[dict[str, Any]]:
    """Red outlines round the heatmap cells ``(row, column)`` (the slow pairs)."""
    index = {label: i for i, label in enumerate(labels)}
    line = {"color": MARK_COLOR, "width": 1.5, "dash": "dot"}
    return [
        {
            "type": "rect",
            "xref": "x",
            "yref": "y",
            "line": line,
            "x0": index[c] - 0.5,
            "x1": index[c] + 0.5,
            "y0": index[r] - 0.5,
            "y1": index[r] + 0.5,
        }
        for r, c in pairs
        if r in index and c in index
    ]
