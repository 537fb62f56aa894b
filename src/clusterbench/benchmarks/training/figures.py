"""Training figures: the scaling series' throughput and scaling efficiency against the GPU
count (one figure per throughput unit: tokens/s for decoders, samples/s for the others), and
the sweep's throughput per GPU of each combination that ran.

The partition search's figure is a run part's (``analyses/partition/figures.py``)."""

from __future__ import annotations

from collections.abc import Iterable

from clusterbench.benchmarks.training.settings import TrainingMetrics as _T
from clusterbench.metrics import Metric
from clusterbench.schema import Measurement
from clusterbench.views.cells import Grid, format_value
from clusterbench.views.figures import (
    REFERENCE_COLOR,
    Spread,
    Trace,
    axis,
    color,
    figure,
    layout,
    spreads_by,
)
from clusterbench.views.plots import Plot, PlotContext

__all__ = ["figures"]

_THROUGHPUT = (
    (_T.tokens_per_s, _T.tokens_per_s_per_gpu),
    (_T.samples_per_s, _T.samples_per_s_per_gpu),
)


def figures(ms: list[Measurement], ctx: PlotContext) -> list[Plot]:
    scaling = [m for m in ms if m.params.get("series") == "scaling"]
    plots = [
        plot
        for total, per_gpu in _THROUGHPUT
        if (plot := _scaling(scaling, total=total, per_gpu=per_gpu)) is not None
    ]
    sweep = _sweep([m for m in ms if m.params.get("series") == "sweep"])
    return plots + ([sweep] if sweep is not None else [])


def _case(m: Measurement) -> str:
    p = m.params
    return f"{p.get('model')} {p.get('strategy')} {p.get('precision')}"


def _world(m: Measurement) -> int:
    w = m.params.get("world_size")
    return w if isinstance(w, int) else 0


def _series(ms: Iterable[Measurement], metric: Metric) -> dict[str, dict[int, Spread]]:
    """Case -> world size -> the value (the median member if several ranks recorded one)."""
    out: dict[str, dict[int, Spread]] = {}
    for (case, w), s in spreads_by(metric.select(ms), lambda m: (_case(m), _world(m))).items():
        out.setdefault(case, {})[w] = s
    return {case: dict(sorted(points.items())) for case, points in out.items()}


def _scaling(ms: list[Measurement], *, total: Metric, per_gpu: Metric) -> Plot | None:
    totals = _series(ms, total)
    if not totals:
        return None
    per = _series(ms, per_gpu)
    eff = {
        case: points
        for case, points in _series(ms, _T.scaling_efficiency).items()
        if case in totals
    }
    unit = total.unit
    data = [
        _throughput(case, points, per.get(case, {}), unit=unit) for case, points in totals.items()
    ]
    data += [_efficiency(case, points) for case, points in eff.items()]
    worlds = sorted({w for points in totals.values() for w in points})
    if eff:
        data.append(
            {
                "type": "scatter",
                "meta": "reference",
                "mode": "lines",
                "name": "ideal scaling 100 %",
                "x": worlds,
                "y": [100.0] * len(worlds),
                "yaxis": "y2",
                "line": {"color": REFERENCE_COLOR, "dash": "dash", "width": 1},
                "hovertemplate": "ideal scaling: 100 %<extra></extra>",
            }
        )
    fig_layout = layout(
        x=axis(
            "GPUs (world size)",
            type="log" if len(worlds) > 2 else "linear",
            tickvals=worlds,
            ticktext=[str(w) for w in worlds],
        ),
        y=axis(f"throughput of the group ({unit})", rangemode="tozero"),
    )
    if eff:
        top = max(s.mid.value for points in eff.values() for s in points.values())
        fig_layout["yaxis2"] = axis(
            "scaling efficiency (%)",
            overlaying="y",
            side="right",
            range=[0, max(120.0, 1.1 * top)],
            showgrid=False,
        )
    table = _scaling_grid(totals, per, eff, unit=unit)
    notes = [] if eff else ["One GPU count only: no scaling efficiency to draw."]
    title = f"Training throughput and scaling efficiency ({unit})"
    return Plot(title, figure(data, fig_layout), table=table, notes=notes)


def _scaling_grid(
    totals: dict[str, dict[int, Spread]],
    per: dict[str, dict[int, Spread]],
    eff: dict[str, dict[int, Spread]],
    *,
    unit: str,
) -> Grid:
    def cell(points: dict[int, Spread], w: int) -> str:
        return format_value(points[w].mid.value) if w in points else "-"

    rows: list[tuple[str, ...]] = [
        (case, str(w), cell(points, w), cell(per.get(case, {}), w), cell(eff.get(case, {}), w))
        for case, points in totals.items()
        for w in points
    ]
    header = ("case", "GPUs", f"{unit} in all", f"{unit} per GPU", "scaling eff. %")
    return Grid(title="training scaling", header=header, rows=rows)


def _sweep(ms: list[Measurement]) -> Plot | None:
    """Throughput per GPU of each combination that ran, and which did not fit."""
    per_gpu = [
        m
        for metric in (_T.tokens_per_s_per_gpu, _T.samples_per_s_per_gpu)
        for m in metric.select(ms)
    ]
    if not per_gpu:
        return None

    def label(m: Measurement) -> str:
        p = m.params
        extra = "".join(
            f" {name}"
            for key, name in (("activation_checkpointing", "ckpt"), ("compile", "compile"))
            if p.get(key)
        )
        return f"{p.get('strategy')} {p.get('precision')}{extra}"

    cells = spreads_by(per_gpu, label)
    mfu = spreads_by(_T.mfu.select(ms), label)
    unit = per_gpu[0].unit
    trace: Trace = {
        "type": "bar",
        "meta": "measurement",
        "name": f"throughput per GPU ({unit})",
        "x": list(cells),
        "y": [s.mid.value for s in cells.values()],
        "marker": {"color": color("sweep")},
        "customdata": [
            f"MFU {format_value(mfu[k].mid.value)} %" if k in mfu else "MFU -" for k in cells
        ],
        "hovertemplate": f"%{{x}}<br>%{{y:.4g}} {unit} per GPU<br>%{{customdata}}<extra></extra>",
    }
    world = per_gpu[0].params.get("world_size")
    fig = figure(
        [trace],
        layout(
            x=axis("strategy, precision, activation checkpointing, compile", type="category"),
            y=axis(f"throughput per GPU ({unit})", rangemode="tozero"),
        ),
    )
    missing = [f"{label(m)}: {m.params.get('reason')}" for m in _T.fits.select(ms) if not m.value]
    notes = [f"Not run: {'; '.join(missing)}."] if missing else []
    rows: list[tuple[str, ...]] = [
        (k, format_value(s.mid.value), format_value(mfu[k].mid.value) if k in mfu else "-")
        for k, s in cells.items()
    ]
    table = Grid(
        title=f"training sweep at {world} GPUs", header=("combination", unit, "MFU %"), rows=rows
    )
    return Plot(
        f"Training sweep at {world} GPUs: throughput per GPU", fig, table=table, notes=notes
    )


def _throughput(
    case: str, points: dict[int, Spread], per_gpu: dict[int, Spread], *, unit: str
) -> Trace:
    return {
        "type": "scatter",
        "meta": "measurement",
        "mode": "lines+markers",
        "name": f"{case} throughput",
        "legendgroup": case,
        "x": list(points),
        "y": [s.mid.value for s in points.values()],
        "line": {"color": color(case), "width": 2},
        "customdata": [format_value(per_gpu[w].mid.value) if w in per_gpu else "-" for w in points],
        "hovertemplate": f"{case}, %{{x}} GPUs<br>%{{y:.4g}} {unit} in all<br>"
        f"%{{customdata}} {unit} per GPU<extra></extra>",
    }


def _efficiency(case: str, points: dict[int, Spread]) -> Trace:
    mode = next(iter(points.values())).mid.params.get("scaling_mode", "")
    return {
        "type": "scatter",
        "meta": "measurement",
        "mode": "lines+markers",
        "name": f"{case} {mode} scaling efficiency",
        "legendgroup": case,
        "x": list(points),
        "y": [s.mid.value for s in points.values()],
        "yaxis": "y2",
        "line": {"color": color(case), "dash": "dot", "width": 2},
        "marker": {"symbol": "diamond", "size": 8},
        "hovertemplate": f"{case}, %{{x}} GPUs<br>{mode} scaling efficiency %{{y:.1f}} %"
        "<extra></extra>",
    }
