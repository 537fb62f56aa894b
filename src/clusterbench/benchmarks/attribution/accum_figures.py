"""The accumulation sweep's figure: idle and collective wait per iteration (% of the iteration)
against accumulation steps; each rank a faint line, the median rank bold with error bars over
every rank's every iteration, and the bottleneck-analysis paper's 11.7% as a dashed line."""

from __future__ import annotations

from clusterbench.benchmarks.attribution.accum import (
    PAPER_IDLE_PCT,
    PAPER_STEPS_WORD,
    AccumPoint,
    accum_curve,
)
from clusterbench.schema import Measurement
from clusterbench.views.cells import Grid, format_value, where
from clusterbench.views.figures import (
    REFERENCE_COLOR,
    Spread,
    Trace,
    axis,
    figure,
    layout,
    spread,
)
from clusterbench.views.plots import Plot, PlotContext

__all__ = ["accum_figure"]

_PARTS = {
    "idle": ("idle (no device activity)", "#0072B2"),
    "wait": ("wait (in collectives for the slowest rank)", "#D55E00"),
}


def _per_rank(points: list[AccumPoint], part: str) -> dict[int, dict[int, Measurement]]:
    """rank -> accumulation steps -> its measurement of ``part``."""
    out: dict[int, dict[int, Measurement]] = {}
    for p in points:
        for rank, m in getattr(p, part).items():
            out.setdefault(rank, {})[p.accum_steps] = m
    return out


def _faint(points: list[AccumPoint], part: str, *, multi_host: bool) -> Trace:
    """Every rank's line as one trace (the ranks apart by gaps), so a large run stays small."""
    name, color_ = _PARTS[part]
    xs: list[str | None] = []
    ys: list[float | None] = []
    who: list[str] = []
    for cells in _per_rank(points, part).values():
        for k, m in sorted(cells.items()):
            xs.append(str(k))
            ys.append(m.value)
            who.append(f"rank {m.rank} ({where(m, multi_host)})")
        xs.append(None)
        ys.append(None)
        who.append("")
    return {
        "type": "scatter", "meta": "measurement", "mode": "lines", "name": f"{part}, each rank",
        "legendgroup": part, "x": xs, "y": ys, "opacity": 0.35,
        "line": {"color": color_, "width": 1}, "customdata": who,
        "hovertemplate": f"%{{customdata}}<br>{name}<br>%{{x}} steps: %{{y:.2f}} %"
        "<extra></extra>",
    }  # fmt: skip


def _bold(points: list[AccumPoint], part: str) -> Trace:
    """The median rank at each count, error bars over every rank's every iteration."""
    name, color_ = _PARTS[part]
    mids: list[Spread] = [spread(list(getattr(p, part).values())) for p in points]
    samples = [
        getattr(p, f"{part}_samples") or [s.mid.value] for p, s in zip(points, mids, strict=True)
    ]
    notes = [
        f"median of {s.count} ranks: rank {s.mid.rank}; iterations {format_value(min(x))}–"
        f"{format_value(max(x))} %"
        for s, x in zip(mids, samples, strict=True)
    ]
    return {
        "type": "scatter", "meta": "measurement", "mode": "lines+markers",
        "name": f"{part}, median rank", "legendgroup": part,
        "x": [str(p.accum_steps) for p in points], "y": [s.mid.value for s in mids],
        "line": {"color": color_, "width": 3}, "marker": {"size": 7}, "customdata": notes,
        "error_y": {
            "type": "data", "symmetric": False, "color": color_, "thickness": 1, "width": 4,
            "array": [max(x) - s.mid.value for s, x in zip(mids, samples, strict=True)],
            "arrayminus": [s.mid.value - min(x) for s, x in zip(mids, samples, strict=True)],
        },
        "hovertemplate": f"{name}<br>%{{x}} steps: %{{y:.2f}} %<br>%{{customdata}}"
        "<extra></extra>",
    }  # fmt: skip


def _paper_line() -> dict[str, list[dict[str, object]]]:
    """The paper's figure as a dashed line across the plot, with its label (layout shapes)."""
    return {
        "shapes": [
            {
                "type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y",
                "y0": PAPER_IDLE_PCT, "y1": PAPER_IDLE_PCT,
                "line": {"color": REFERENCE_COLOR, "dash": "dash", "width": 1.5},
            }
        ],
        "annotations": [
            {
                "xref": "paper", "x": 1, "yref": "y", "y": PAPER_IDLE_PCT, "xanchor": "right",
                "yanchor": "bottom", "showarrow": False, "font": {"color": REFERENCE_COLOR},
                "text": f"the bottleneck-analysis paper: up to {PAPER_IDLE_PCT}% idle past "
                f"{PAPER_STEPS_WORD} steps",
            }
        ],
    }  # fmt: skip


def accum_figure(ms: list[Measurement], ctx: PlotContext) -> Plot | None:
    points = [p for p in accum_curve(ms) if p.idle and p.wait]
    if not points:
        return None
    data = [
        trace
        for part in _PARTS
        for trace in (_faint(points, part, multi_host=ctx.multi_host), _bold(points, part))
    ]
    # room for the paper's line and for the error bars' tops
    drawn = [v for t in data for v in t["y"] if v is not None]
    drawn += [v for p in points for v in (*p.idle_samples, *p.wait_samples)]
    top = max(PAPER_IDLE_PCT * 1.15, 1.1 * max(drawn))
    fig_layout = layout(
        x=axis("accumulation steps per optimizer step", type="category"),
        y=axis("share of the iteration (%)", range=[0, top]),
        **_paper_line(),
    )
    rows: list[tuple[str, ...]] = []
    for p in points:
        idle, wait = spread(list(p.idle.values())), spread(list(p.wait.values()))
        rows.append(
            (
                str(p.accum_steps),
                f"{format_value(idle.mid.value)} ({format_value(idle.low.value)}–"
                f"{format_value(idle.high.value)})",
                f"{format_value(wait.mid.value)} ({format_value(wait.low.value)}–"
                f"{format_value(wait.high.value)})",
            )
        )
    table = Grid(
        title="idle and wait per iteration, % (median rank, lowest–highest rank)",
        header=("accumulation steps", "idle %", "wait %"),
        rows=rows,
    )
    notes = [
        "Per iteration (one optimizer step of k micro-steps), from each rank's trace: idle is "
        "time with no device activity, wait the time inside collectives until the latest rank "
        "starts them. Faint lines: each rank (its mean over the profiled iterations); bold: the "
        "median rank; error bars: lowest to highest of every rank's every iteration."
    ]
    title = "Attribution: coordination idle per iteration by accumulation steps"
    return Plot(title, figure(data, fig_layout), table=table, notes=notes)
