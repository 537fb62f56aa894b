"""The run's scaling prediction as curves against the GPU count (log axis): the predicted
weak-scaling efficiency and step time of each strategy as lines, their band (the link fits'
prediction interval) as a filled area, the training scaling series' measurements as markers,
and the validation's predictions of the measured sizes.

Besides the kinds every figure has (``meta`` "measurement": a
measurement's own value, "reference": the target efficiency), the model's figures carry
``meta`` "prediction": computed, not measured.  The tables beside the curves are the
section's own (:mod:`clusterbench.analyses.prediction.section`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from clusterbench.analyses.prediction import section as sections
from clusterbench.analyses.prediction.predict import Prediction
from clusterbench.analyses.prediction.scaling_model import StepPrediction, Strategy
from clusterbench.declared.training import TrainingMetrics as _T
from clusterbench.schema import Measurement, Results
from clusterbench.views.figures import (
    MARK_COLOR,
    REFERENCE_COLOR,
    Trace,
    axis,
    color,
    figure,
    layout,
    reference_line,
)
from clusterbench.views.plots import Plot

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = ["figures"]

_STRATEGY_COLORS = {"ddp": "#0072B2", "fsdp": "#E69F00"}


def figures(results: Results, run: RunView) -> list[Plot]:
    """Efficiency and step time against the GPU count ([] when there is no prediction)."""
    p = run.prediction
    if not isinstance(p, Prediction):
        return []
    return [_efficiency(p, results), _step_time(p)]


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _curves(p: Prediction, strategy: Strategy) -> list[StepPrediction]:
    return [c for c in p.curve if c.strategy == strategy]


def _x_axis(p: Prediction, extra: Sequence[int] = ()) -> dict[str, object]:
    worlds = sorted({c.world_size for c in p.curve} | set(extra))
    return axis(
        "GPUs (world size, log scale)", type="log", tickvals=worlds,
        ticktext=[str(w) for w in worlds],
    )  # fmt: skip


def _lines(
    p: Prediction, *, value: str, low: str, high: str, scale: float, unit: str, what: str
) -> list[Trace]:
    """Per strategy: its band (lower edge, then the upper edge filled to it), then its line."""
    out: list[Trace] = []
    for strategy in p.strategies:
        points = _curves(p, strategy)
        xs = [c.world_size for c in points]
        c = color(strategy, _STRATEGY_COLORS)
        band = f"{strategy} {p.confidence:.0%} band"
        edge: Trace = {
            "type": "scatter", "meta": "prediction", "mode": "lines", "x": xs,
            "line": {"color": c, "width": 0}, "legendgroup": strategy,
        }  # fmt: skip
        out.append({
            **edge, "name": f"{band} (low)", "showlegend": False,
            "y": [scale * getattr(s, low) for s in points],
            "hovertemplate": f"{strategy}, %{{x}} GPUs<br>band low %{{y:.4g}} {unit}"
            "<extra></extra>",
        })  # fmt: skip
        out.append({
            **edge, "name": band, "fill": "tonexty", "fillcolor": _rgba(c, 0.2),
            "y": [scale * getattr(s, high) for s in points],
            "hovertemplate": f"{strategy}, %{{x}} GPUs<br>band high %{{y:.4g}} {unit}"
            "<extra></extra>",
        })  # fmt: skip
        out.append({
            "type": "scatter", "meta": "prediction", "mode": "lines",
            "name": f"{strategy} predicted", "legendgroup": strategy, "x": xs,
            "y": [scale * getattr(s, value) for s in points],
            "line": {"color": c, "width": 2},
            "hovertemplate": f"{strategy} predicted, %{{x}} GPUs<br>{what} %{{y:.4g}} {unit}"
            "<extra></extra>",
        })  # fmt: skip
    return out


def _markers(ms: Sequence[Measurement], *, name: str, what: str, unit: str) -> Trace:
    """The measurements as they are, one marker each at its world size."""
    ordered = sorted(ms, key=_world)
    return {
        "type": "scatter", "meta": "measurement", "mode": "markers", "name": name,
        "x": [m.params.get("world_size") for m in ordered], "y": [m.value for m in ordered],
        "marker": {"color": REFERENCE_COLOR, "size": 9, "symbol": "circle"},
        "hovertemplate": f"measured, %{{x}} GPUs<br>{what} %{{y:.4g}} {unit}<extra></extra>",
    }  # fmt: skip


def _world(m: Measurement) -> int:
    w = m.params.get("world_size")
    return w if isinstance(w, int) else 0


def _notes(p: Prediction) -> list[str]:
    notes = [
        f"Band: the {p.confidence:.0%} prediction interval of the link fits, from their "
        "residuals (zero for an assumed link)."
    ]
    notes += [f"Assumed: {a}." for a in p.assumptions()]
    return notes


def _efficiency(p: Prediction, results: Results) -> Plot:
    measured = [
        m
        for m in _T.scaling_efficiency.select(results)
        if m.params.get("series", "scaling") == "scaling" and p.series.same_case(m)
    ]
    data = _lines(
        p, value="efficiency", low="efficiency_low", high="efficiency_high", scale=100.0,
        unit="%", what="weak-scaling efficiency",
    )  # fmt: skip
    if measured:
        data.append(
            _markers(measured, name="measured (training)", what="scaling efficiency", unit="%")
        )
    xs = sorted({c.world_size for c in p.curve})
    target = 100 * p.target_efficiency
    data.append(reference_line(xs, target, name=f"target {target:.0f} %", unit="%"))
    fig_layout = layout(
        x=_x_axis(p), y=axis("weak-scaling efficiency (%)", range=[0, 105], rangemode="tozero")
    )
    title = (
        f"Predicted weak-scaling efficiency of {p.series.model} ({p.gpus_per_node} "
        f"{p.series.unit}s per node, "
        f"{p.inter_node_gbps:,.0f} Gb/s per node)"
    )
    return Plot(
        title, figure(data, fig_layout), table=sections.predictions_grid(p), notes=_notes(p)
    )


def _step_time(p: Prediction) -> Plot:
    data = _lines(
        p, value="step_s", low="step_low_s", high="step_high_s", scale=1e3, unit="ms",
        what="step time",
    )  # fmt: skip
    data.append(
        _markers(p.series.measurements, name="measured (training)", what="step time", unit="ms")
    )
    notes = _notes(p)
    v = p.validation
    if v is not None:
        data.append({
            "type": "scatter", "meta": "prediction", "mode": "markers",
            "name": f"validation: fitted on {', '.join(map(str, v.fit_sizes))}",
            "x": [pt.world_size for pt in v.points],
            "y": [1e3 * pt.predicted_s for pt in v.points],
            "marker": {"color": MARK_COLOR, "size": 11, "symbol": "x"},
            "customdata": [f"{100 * pt.rel_error:+.1f} %" for pt in v.points],
            "hovertemplate": "validation, %{x} GPUs<br>predicted %{y:.4g} ms<br>error "
            "%{customdata}<extra></extra>",
        })  # fmt: skip
    else:
        notes.append(f"No validation: {p.validation_reason}.")
    measured_sizes = [int(w) for w in p.series.step_s]
    fig_layout = layout(x=_x_axis(p, measured_sizes), y=axis("step time (ms)", rangemode="tozero"))
    title = f"Step time of {p.series.model}: measured, validated and predicted"
    return Plot(title, figure(data, fig_layout), table=sections.validation_grid(p), notes=notes)
