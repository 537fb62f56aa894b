"""GEMM figures: TFLOP/s of each shape per dtype, against the dtype's spec peak, with each
dtype's best shape marked (the ``tflops_best`` row)."""

from __future__ import annotations

from clusterbench.benchmarks.gemm import GemmMetrics
from clusterbench.schema import Measurement
from clusterbench.views.cells import Grid, format_value, where
from clusterbench.views.figures import (
    DTYPE_COLORS,
    Spread,
    Trace,
    axis,
    color,
    error_bars,
    figure,
    layout,
    median_note,
    reference_line,
    spread_note,
    spreads_by,
)
from clusterbench.views.plots import Plot, PlotContext

__all__ = ["figures"]

_UNIT = "TFLOP/s"


def _shape(m: Measurement) -> str:
    """``8192³`` for a cube, else ``4096×4096×16384`` (M×N×K)."""
    dims = [m.params.get(d) for d in ("m", "n", "k")]
    return f"{dims[0]}³" if len(set(dims)) == 1 else "×".join(map(str, dims))


def _peak(s: Spread) -> float | None:
    ref = s.mid.reference
    return ref.value if ref is not None and ref.kind == "spec_peak" and ref.value > 0 else None


def figures(ms: list[Measurement], ctx: PlotContext) -> list[Plot]:
    per_shape = spreads_by(
        GemmMetrics.tflops.select(ms), lambda m: (str(m.params.get("dtype")), _shape(m))
    )
    if not per_shape:
        return []
    best = spreads_by(GemmMetrics.tflops_best.select(ms), lambda m: str(m.params.get("dtype")))
    data: list[Trace] = []
    rows: list[tuple[str, ...]] = []
    peaks: dict[float, list[str]] = {}
    for dtype in dict.fromkeys(dtype for dtype, _ in per_shape):
        cells = {shape: s for (d, shape), s in per_shape.items() if d == dtype}
        best_shape = _shape(best[dtype].mid) if dtype in best else None
        data.append(_bars(dtype, cells, best_shape=best_shape, multi_host=ctx.multi_host))
        peak = next((p for s in cells.values() if (p := _peak(s)) is not None), None)
        if peak is not None:
            peaks.setdefault(peak, []).append(dtype)
        rows += [
            _row(dtype, shape, s, peak, best=shape == best_shape) for shape, s in cells.items()
        ]
    for peak, dtypes in peaks.items():  # one line for the dtypes of one peak (bf16 and fp16)
        name = f"{', '.join(dtypes)} peak {format_value(peak)} {_UNIT}"
        data.append(reference_line(None, peak, name=name, unit=_UNIT, color_=_c(dtypes[0])))
    fig = figure(
        data,
        layout(
            x=axis("matrix shape M×N×K (³: a cube)", type="category"),
            y=axis(f"throughput ({_UNIT})", rangemode="tozero"),
            barmode="group",
        ),
    )
    notes = ["The outlined bar of each dtype is its best shape (gemm's tflops_best)."]
    if peaks:
        notes.append("Dashed: each dtype's dense peak from the GPU's spec.")
    notes += median_note(per_shape.values())
    if not peaks:
        notes.append("No spec peak is known for this device, so none is drawn.")
    header = ("dtype", "shape", _UNIT, "spec peak", "% of peak", "devices", "best")
    table = Grid(title=f"GEMM throughput per shape, {_UNIT}", header=header, rows=rows)
    return [Plot("GEMM TFLOP/s per shape and dtype", fig, table=table, notes=notes)]


def _c(dtype: str) -> str:
    return color(dtype, DTYPE_COLORS)


def _bars(
    dtype: str, cells: dict[str, Spread], *, best_shape: str | None, multi_host: bool
) -> Trace:
    spreads = list(cells.values())
    is_best = [shape == best_shape for shape in cells]
    pct = [
        f"{100 * s.mid.value / p:.0f}% of the spec peak" if (p := _peak(s)) else "no spec peak"
        for s in spreads
    ]
    trace: Trace = {
        "type": "bar",
        "meta": "measurement",
        "name": dtype,
        "legendgroup": dtype,
        "x": list(cells),
        "y": [s.mid.value for s in spreads],
        "marker": {
            "color": _c(dtype),
            "line": {"color": "#000000", "width": [2.5 if b else 0 for b in is_best]},
        },
        "text": ["best" if b else "" for b in is_best],
        "textposition": "outside",
        "customdata": [
            [p, spread_note(s, _UNIT, lambda m: where(m, multi_host))]
            for p, s in zip(pct, spreads, strict=True)
        ],
        "hovertemplate": (
            f"{dtype} %{{x}}<br>%{{y:.4g}} {_UNIT} (%{{customdata[0]}})<br>%{{customdata[1]}}"
            "<extra></extra>"
        ),
    }
    bars = error_bars(spreads)
    if bars is not None:
        trace["error_y"] = bars
    return trace


def _row(dtype: str, shape: str, s: Spread, peak: float | None, *, best: bool) -> tuple[str, ...]:
    value = s.mid.value
    return (
        dtype,
        shape,
        format_value(value),
        format_value(peak),
        f"{value / peak:.0%}" if peak else "-",
        str(s.count),
        "yes" if best else "",
    )
