"""Attribution figures: where each rank's step time goes, the four classes (compute, memory,
exposed communication, coordination; % of the step, summing to 100) as stacked bars per rank,
with the straggler that analysis names marked; and the accumulation sweep's idle and wait per
iteration against accumulation steps (:mod:`.attribution_accum`)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from clusterbench.benchmarks.attribution.accum_figures import accum_figure
from clusterbench.benchmarks.attribution.findings import CLASSES
from clusterbench.benchmarks.attribution.stragglers import Straggler, find_straggler
from clusterbench.benchmarks.attribution.thresholds import AttributionThresholds
from clusterbench.schema import Measurement
from clusterbench.views.cells import Grid, format_value, where
from clusterbench.views.figures import (
    CLASS_COLORS,
    MARK_COLOR,
    Trace,
    axis,
    color,
    figure,
    layout,
)
from clusterbench.views.plots import Plot, PlotContext

__all__ = ["figures"]

_LABELS = {"communication": "communication (exposed)"}


def figures(ms: list[Measurement], ctx: PlotContext) -> list[Plot]:
    classes = _classes_figure(ms, ctx)
    accum = accum_figure(ms, ctx)
    return [p for p in (classes, accum) if p is not None]


def _classes_figure(ms: list[Measurement], ctx: PlotContext) -> Plot | None:
    mean = [m for m in ms if m.params.get("rank_step", "mean") == "mean"]
    by_rank: dict[int, dict[str, Measurement]] = defaultdict(dict)
    for m in mean:
        if any(c.matches(m) for c in CLASSES):
            by_rank[m.rank][m.metric] = m
    if not by_rank:
        return None
    ranks = sorted(by_rank)
    labels = [str(r) for r in ranks]
    devices = [where(next(iter(by_rank[r].values())), ctx.multi_host) for r in ranks]
    data: list[Trace] = []
    for c in CLASSES:
        name = _LABELS.get(c.name, c.name)
        data.append(
            {
                "type": "bar",
                "meta": "measurement",
                "name": name,
                "x": labels,
                "y": [by_rank[r][c.name].value if c.name in by_rank[r] else None for r in ranks],
                "marker": {"color": color(c.name, CLASS_COLORS)},
                "customdata": devices,
                "hovertemplate": f"rank %{{x}} (%{{customdata}})<br>{name} %{{y:.1f}} %"
                "<extra></extra>",
            }
        )
    fig_layout = layout(
        x=axis("rank", type="category"),
        # room above the bars for the straggler's mark, inside the plot (the legend is above)
        y=axis("share of the step time (%)", range=[0, 120], tickvals=[0, 20, 40, 60, 80, 100]),
        barmode="stack",
        bargap=0.15 if len(ranks) < 64 else 0.0,
    )
    notes = []
    straggler = find_straggler(
        mean, min_spread_pct=ctx.thresholds.of(AttributionThresholds).straggler_min_spread_pct
    )
    if straggler is not None:
        notes.append(_mark_straggler(fig_layout, straggler, ranks))
    header = ("rank", "device", *(_LABELS.get(c.name, c.name) + " %" for c in CLASSES))
    rows = [
        (
            str(r),
            d,
            *(
                format_value(by_rank[r][c.name].value) if c.name in by_rank[r] else "-"
                for c in CLASSES
            ),
        )
        for r, d in zip(ranks, devices, strict=True)
    ]
    table = Grid(title="where each rank's step time goes, %", header=header, rows=rows)
    title = "Attribution: where each rank's step time goes (mean over the profiled steps)"
    return Plot(title, figure(data, fig_layout), table=table, notes=notes)


def _mark_straggler(fig_layout: dict[str, Any], straggler: Straggler, ranks: list[int]) -> str:
    """The straggler's rank marked on the figure (a label above its bar, a frame around it);
    the note that says why."""
    m, r = straggler.step_time, straggler.rank
    fig_layout["annotations"] = [
        {
            "x": str(r),
            "y": 100,
            "xref": "x",
            "yref": "y",
            "text": f"straggler: rank {r}",
            "showarrow": True,
            "arrowcolor": MARK_COLOR,
            "ax": 0,
            "ay": -22,
            "font": {"color": MARK_COLOR},
            "bgcolor": "#FFFFFF",
        }
    ]
    i = ranks.index(r)
    fig_layout["shapes"] = [
        {
            "type": "rect",
            "xref": "x",
            "yref": "y",
            "x0": i - 0.5,
            "x1": i + 0.5,
            "y0": 0,
            "y1": 100,
            "line": {"color": MARK_COLOR, "width": 2},
        }
    ]
    return (
        f"Marked: rank {r} ({m.host} {m.device}), the straggler (attribution.straggler): "
        f"it starts its collectives {format_value(straggler.lateness_ms[r])} ms after the "
        f"earliest rank and waits {format_value(straggler.coordination_pct[r])} % of the "
        "step while the others wait longer."
    )
