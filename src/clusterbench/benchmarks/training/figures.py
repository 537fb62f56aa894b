"""Training figures: the scaling series' throughput and scaling efficiency against the GPU
count (one figure per throughput unit: tokens/s for decoders, samples/s for the others), and
the sweep's throughput per GPU of each combination that ran.

The partition search's figure (:func:`partition_figures`) is drawn from the whole run, as its
section is (:mod:`clusterbench.benchmarks.training.section`): the time to batch of each
candidate, measured bars (``meta`` "measurement": the measurements' own medians, the fastest
to the slowest step as error bars) and predicted ones lighter and hatched (``meta``
"prediction": computed, not measured; the link fits' band as error bars)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from clusterbench.analysis.partition import Partition, Row
from clusterbench.benchmarks.training import section as sections
from clusterbench.benchmarks.training.settings import TrainingMetrics as _T
from clusterbench.metrics import Metric
from clusterbench.schema import Measurement, Results
from clusterbench.views.cells import Grid, format_value
from clusterbench.views.figures import (
    MARK_COLOR,
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

if TYPE_CHECKING:
    from clusterbench.analysis.view import RunView

__all__ = ["figures", "partition_figures"]

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


_MEASURED_COLOR = "#0072B2"
_PREDICTED_COLOR = "rgba(0,114,178,0.35)"


def partition_figures(results: Results, run: RunView) -> list[Plot]:
    """The partition search's time to batch per candidate ([] when the run did not search)."""
    p = sections.run_partition(results)
    drawn = [r for r in p.rows if r.time_ms is not None] if p is not None else []
    if p is None or not drawn:
        return []
    measured = [r for r in drawn if r.basis == "measured"]
    predicted = [r for r in drawn if r.basis == "predicted"]
    data = [_partition_bars(measured, p, predicted=False)] if measured else []
    data += [_partition_bars(predicted, p, predicted=True)] if predicted else []
    fig = figure(
        data,
        layout(
            x=axis("partition: d ranks × micro-batch × accumulation steps", type="category",
                   categoryorder="array", categoryarray=[_bar_label(r) for r in drawn]),
            y=axis("time to batch (ms)", rangemode="tozero"),
            barmode="overlay",
        ),
    )  # fmt: skip
    notes = [f"Global batch {p.global_batch}; fastest first; outlined: the default partition"
             + (f", red: the recommended {p.recommended.label}" if p.recommended else
                ": no measured partition beat it beyond the noise") + "."]  # fmt: skip
    if predicted:
        error = p.model_error
        err = (
            f"±{100 * error:.0f}% as measured in this run" if error is not None else "not measured"
        )
        notes.append(f"Hatched: predicted by the scaling model (error {err}), never recommended.")
    missing = [f"{r.label}: {r.reason}" for r in p.rows if r.time_ms is None]
    if missing:
        notes.append(f"Not run: {'; '.join(missing)}.")
    return [Plot(f"Training partition of the global batch {p.global_batch}: time to batch",
                 fig, notes=notes)]  # fmt: skip


def _bar_label(r: Row) -> str:
    return r.label + (" (default)" if r.default else "")


def _partition_bars(rows: list[Row], p: Partition, *, predicted: bool) -> Trace:
    lines = [
        MARK_COLOR if r is p.recommended else REFERENCE_COLOR if r.default else "rgba(0,0,0,0)"
        for r in rows
    ]
    marker: dict[str, object] = {
        "color": _PREDICTED_COLOR if predicted else _MEASURED_COLOR,
        "line": {
            "color": lines,
            "width": [3 if r.default or r is p.recommended else 0 for r in rows],
        },
    }
    if predicted:
        marker["pattern"] = {"shape": "/", "fgcolor": _MEASURED_COLOR}
    y = [r.time_ms or 0.0 for r in rows]
    what = "predicted" if predicted else "measured"
    return {
        "type": "bar",
        "meta": "prediction" if predicted else "measurement",
        "name": f"{what} time to batch (ms)",
        "x": [_bar_label(r) for r in rows],
        "y": y,
        "marker": marker,
        "error_y": {
            "type": "data",
            "symmetric": False,
            "array": [
                0.0 if r.high_ms is None else r.high_ms - t for r, t in zip(rows, y, strict=True)
            ],
            "arrayminus": [
                0.0 if r.low_ms is None else t - r.low_ms for r, t in zip(rows, y, strict=True)
            ],
            "color": REFERENCE_COLOR,
            "thickness": 1,
            "width": 3,
        },
        "customdata": [
            f"{format_value(r.throughput)} {p.unit}; {r.verdict.replace('_', ' ')}" for r in rows
        ],
        "hovertemplate": f"%{{x}}<br>{what} %{{y:.4g}} ms to the batch<br>%{{customdata}}"
        "<extra></extra>",
    }
