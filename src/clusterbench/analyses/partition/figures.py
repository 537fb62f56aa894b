"""The training partition search's figure, drawn from the whole run as its section is
(:mod:`clusterbench.analyses.partition.section`): the time to batch of each candidate, measured
bars (``meta`` "measurement": the measurements' own medians, the fastest to the slowest step as
error bars) and predicted ones lighter and hatched (``meta`` "prediction": computed, not
measured; the link fits' band as error bars)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterbench.analyses.partition.search import Partition, Row
from clusterbench.analyses.partition.section import run_partition
from clusterbench.schema import Results
from clusterbench.views.cells import format_value
from clusterbench.views.figures import MARK_COLOR, REFERENCE_COLOR, Trace, axis, figure, layout
from clusterbench.views.plots import Plot

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = ["figures"]

_MEASURED_COLOR = "#0072B2"
_PREDICTED_COLOR = "rgba(0,114,178,0.35)"


def figures(results: Results, run: RunView) -> list[Plot]:
    """The partition search's time to batch per candidate ([] when the run did not search)."""
    p = run_partition(results)
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
