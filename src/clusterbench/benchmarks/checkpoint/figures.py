"""Checkpoint figures: save and load bandwidth per format (torch.save, safetensors, DCP) at the
largest state each wrote, the seconds of one save and load in the hover; and the seconds
against the state's size, measured and fitted (t = α + S/β), the fit carried out to the
checkpoints of the models predicted."""

from __future__ import annotations

from clusterbench.benchmarks.checkpoint import CheckpointMetrics as _C
from clusterbench.benchmarks.checkpoint.section import predicted_grid
from clusterbench.metrics import Metric
from clusterbench.schema import Measurement
from clusterbench.views.cells import Grid, format_bytes, format_value
from clusterbench.views.figures import (
    DIRECTION_COLORS,
    Spread,
    Trace,
    axis,
    bar_trace,
    color,
    figure,
    layout,
    median_note,
    spreads_by,
)
from clusterbench.views.plots import Plot, PlotContext

__all__ = ["figures"]

_UNIT = "GB/s"


def _format(m: Measurement) -> str:
    ranks = m.params.get("num_ranks")
    return f"{m.params.get('format')}" + (f" ({ranks} ranks)" if ranks else "")


def figures(ms: list[Measurement], ctx: PlotContext) -> list[Plot]:
    plots = [_bandwidth(_largest(ms), ctx), _scaling(ms)]
    return [p for p in plots if p is not None]


def _largest(ms: list[Measurement]) -> list[Measurement]:
    """Each format's measurements at the largest state it wrote (per host)."""
    top: dict[tuple[str, str], float] = {}
    for m in ms:
        size = m.params.get("size_bytes")
        if isinstance(size, int | float):
            key = (m.host, str(m.params.get("format")))
            top[key] = max(top.get(key, 0.0), float(size))
    return [
        m
        for m in ms
        if m.params.get("size_bytes") == top.get((m.host, str(m.params.get("format"))))
    ]


def _bandwidth(ms: list[Measurement], ctx: PlotContext) -> Plot | None:
    rates: dict[str, dict[str, Spread]] = {}
    times: dict[str, dict[str, Spread]] = {}
    for kind, rate, secs in (("save", _C.save_gbps, _C.save_s), ("load", _C.load_gbps, _C.load_s)):
        cells = _by_format(ms, rate)
        if cells:
            rates[kind], times[kind] = cells, _by_format(ms, secs)
    if not rates:
        return None
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
    notes = [
        "Saves are made durable (fsync); loads read with the page cache dropped first; each "
        "format at the largest state it wrote."
    ]
    notes += median_note([s for cells in rates.values() for s in cells.values()], "rank")
    return Plot("Checkpoint save and load bandwidth", fig, table=table, notes=notes)


_SECONDS = {"save": _C.save_s, "load": _C.load_s, "async_block": _C.async_block_s,
            "async_total": _C.async_total_s}  # fmt: skip


def _scaling(ms: list[Measurement]) -> Plot | None:
    """Seconds against bytes, log-log: each format and operation's measured sizes (rank 0's
    medians), and the checkpoints predicted from them, on the fitted line."""
    fits = {
        (str(m.params.get("format")), str(m.params.get("op"))): m for m in _C.fit_gbps.select(ms)
    }
    if not fits:
        return None
    alphas = {(str(m.params.get("format")), str(m.params.get("op"))): m.value
              for m in _C.fit_latency_s.select(ms)}  # fmt: skip
    predicted = _C.predicted_s.select(ms)
    data: list[Trace] = []
    for (fmt, op), fit in fits.items():
        metric = _SECONDS.get(op)
        points = sorted(
            (float(m.params["size_bytes"]), m.value)  # type: ignore[arg-type]
            for m in (metric.select(ms) if metric else [])
            if m.params.get("format") == fmt and isinstance(m.params.get("size_bytes"), int | float)
        )
        if not points:
            continue
        name, hue = f"{fmt} {op}", color(f"{fmt} {op}")
        data.append({
            "type": "scatter", "mode": "markers", "meta": "measurement", "name": name,
            "legendgroup": name, "x": [x / 1e9 for x, _ in points], "y": [y for _, y in points],
            "marker": {"color": hue, "size": 8},
            "hovertemplate": f"{name}<br>%{{x:.3g}} GB: %{{y:.3g}} s (measured)<extra></extra>",
        })  # fmt: skip
        # the predicted checkpoints lie on the fitted line t = α + S/β: drawn through them
        ahead = sorted(
            (float(m.params["checkpoint_bytes"]), m.value, f"{m.params.get('model')}, "  # type: ignore[arg-type]
             f"{m.params.get('state')}")
            for m in predicted if (m.params.get("format"), m.params.get("op")) == (fmt, op)
        )  # fmt: skip
        if ahead:
            alpha = alphas.get((fmt, op), 0.0)
            data.append({
                "type": "scatter", "mode": "lines+markers", "meta": "measurement",
                "name": f"{name} predicted", "legendgroup": name, "showlegend": False,
                "x": [x / 1e9 for x, _, _ in ahead], "y": [y for _, y, _ in ahead],
                "text": [t for _, _, t in ahead],
                "line": {"color": hue, "dash": "dot", "width": 1},
                "marker": {"color": hue, "size": 9, "symbol": "x"},
                "hovertemplate": f"{name}<br>%{{text}}: %{{x:.3g}} GB, %{{y:.3g}} s predicted "
                f"(t = {alpha:.3g} s + S / {fit.value:.3g} GB/s)<extra></extra>",
            })  # fmt: skip
    fig = figure(
        data,
        layout(
            x=axis("checkpoint size (GB)", type="log"),
            y=axis("one save, load or async save (s)", type="log"),
        ),
    )
    notes = [
        "Dots: the sizes measured (median of the rounds); crosses on a dotted line: the "
        "checkpoints predicted by t = α + S/β fitted to them (the table)."
    ]
    return Plot("Checkpoint time against size", fig, table=predicted_grid(ms), notes=notes)


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
