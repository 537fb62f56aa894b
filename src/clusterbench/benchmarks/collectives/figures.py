"""Collectives figures: busbw against message size, one figure per group kind with a curve per
collective (log axes, size and busbw), its reference line and, in a comparison, the base
run's curves dashed; and the busbw between node pairs as a heatmap with the slow node marked.

A kind with many groups (a node's NVLink group on each of 64 nodes, 2,016 node pairs) draws one
curve per op: at each size the group at the median, with the lowest and highest as error bars.
Only back-to-back timings are drawn (the busbw nccl-tests reports).

The NCCL tuning sweep draws, per op, each setting's time at each size on a log axis, with the
95% bootstrap interval of its median as error bars, the default's time at each size as a dashed
line, and the settings that beat it marked
(:mod:`clusterbench.benchmarks.collectives.tune_analysis`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clusterbench.benchmarks.collectives import CollectivesMetrics
from clusterbench.benchmarks.collectives.tune_analysis import TuneRow, tune_rows
from clusterbench.benchmarks.pair_figures import node_pair_plot
from clusterbench.judging.pair_series import node_pair_busbw
from clusterbench.schema import Measurement
from clusterbench.views.cells import Grid, format_bytes, format_value
from clusterbench.views.figures import (
    MARK_COLOR,
    OP_COLORS,
    Spread,
    Trace,
    axis,
    color,
    error_bars,
    figure,
    layout,
    median_note,
    reference_line,
    spreads_by,
)
from clusterbench.views.plots import Plot, PlotContext

__all__ = ["figures"]

_UNIT = "GB/s"
_KINDS = {
    "world": "all ranks",
    "intra_node": "within each node",
    "inter_node": "across nodes, one rank per node (rails)",
    "node_pairs": "node pairs",
}
_MODE = "back_to_back"


def figures(ms: list[Measurement], ctx: PlotContext) -> list[Plot]:
    busbw = _busbw(ms)
    base = _busbw(ctx.base or [])
    kinds = list(dict.fromkeys(str(m.params.get("group_kind")) for m in busbw))
    plots = [_curves(busbw, base, kind=kind, has_base=ctx.base is not None) for kind in kinds]
    t = ctx.thresholds
    for series in node_pair_busbw(
        ms, mads=t.outlier_mads, min_rel=t.node_pair_min_rel, sigmas=t.outlier_spread_sigmas
    ):
        size = max(_size(m) for m in series.pairs.values())
        plots.append(
            node_pair_plot(
                title=f"{series.op} busbw between node pairs ({series.dtype}, up to "
                f"{format_bytes(size)})",
                what=f"{series.op} busbw",
                pairs=series.pairs,
                slow=series.slow,
                directed=False,
                finding_id="collectives.slow_node_pair",
            )
        )
    return plots + tune_plots(ms)


def _busbw(ms: Sequence[Measurement]) -> list[Measurement]:
    return [m for m in CollectivesMetrics.busbw.select(ms) if m.params.get("mode") == _MODE]


def _size(m: Measurement) -> int:
    size = m.params.get("size_bytes")
    return size if isinstance(size, int) else 0


def _op_key(m: Measurement) -> tuple[str, str]:
    return (str(m.params.get("op")), str(m.params.get("dtype")))


def _curves(
    busbw: list[Measurement], base: list[Measurement], *, kind: str, has_base: bool
) -> Plot:
    ms = [m for m in busbw if m.params.get("group_kind") == kind]
    by_op = _by_op(ms)
    base_by_op = _by_op([m for m in base if m.params.get("group_kind") == kind])
    dtypes = {dtype for _, dtype in by_op}
    sizes = sorted({_size(m) for m in ms})
    data: list[Trace] = []
    for key, cells in by_op.items():
        data.append(_curve(key, cells, base=False, show_dtype=len(dtypes) > 1))
        if key in base_by_op:
            data.append(_curve(key, base_by_op[key], base=True, show_dtype=len(dtypes) > 1))
    refs = sorted({(r.kind, r.value) for m in ms if (r := m.reference) is not None and r.value})
    for ref_kind, value in refs:
        what = "achievable" if ref_kind == "achievable" else "NVLink spec per direction"
        name = f"{what} {format_value(value)} {_UNIT}"
        data.append(reference_line([sizes[0], sizes[-1]], value, name=name, unit=_UNIT))
    groups = {str(m.params.get("group")) for m in ms}
    ranks = sorted({m.params.get("group_size") for m in ms}, key=str)
    where = _KINDS.get(kind, kind)
    title = f"busbw by message size, {where} ({len(groups)} group{'s' if len(groups) > 1 else ''}"
    title += f" of {'/'.join(map(str, ranks))} ranks, {'/'.join(sorted(dtypes))})"
    fig = figure(
        data,
        layout(
            x=axis("message size (bytes, log scale)", type="log", **_size_ticks(sizes)),
            # log: small messages' busbw is orders of magnitude below the large ones' (8 B to
            # 32 KiB drew as a flat line at zero on a linear axis)
            y=axis(f"busbw ({_UNIT}, log scale)", type="log"),
        ),
    )
    notes = median_note([s for cells in by_op.values() for s in cells.values()], "group")
    if has_base:
        notes.append("Dashed: the base run." if base_by_op else "The base run has no such curve.")
    return Plot(title, fig, table=_grid(title, by_op, sizes), notes=notes)


def _by_op(ms: list[Measurement]) -> dict[tuple[str, str], dict[int, Spread]]:
    out: dict[tuple[str, str], dict[int, Spread]] = {}
    for (op, dtype, size), s in spreads_by(ms, lambda m: (*_op_key(m), _size(m))).items():
        out.setdefault((op, dtype), {})[size] = s
    return {key: dict(sorted(cells.items())) for key, cells in out.items()}


def _curve(
    key: tuple[str, str], cells: dict[int, Spread], *, base: bool, show_dtype: bool
) -> Trace:
    op, dtype = key
    name = f"{op} ({dtype})" if show_dtype else op
    spreads = list(cells.values())
    trace: Trace = {
        "type": "scatter",
        "meta": "base" if base else "measurement",
        "mode": "lines+markers",
        "name": f"base: {name}" if base else name,
        "legendgroup": name,
        "x": list(cells),
        "y": [s.mid.value for s in spreads],
        "line": {"color": color(op, OP_COLORS), "dash": "dash" if base else "solid", "width": 2},
        "marker": {"size": 5},
        "customdata": [[format_bytes(size), _group_note(s)] for size, s in cells.items()],
        "hovertemplate": (
            f"{'base ' if base else ''}{name} %{{customdata[0]}}<br>busbw %{{y:.4g}} {_UNIT}"
            "<br>%{customdata[1]}<extra></extra>"
        ),
    }
    if base:
        trace["opacity"] = 0.6
    bars = error_bars(spreads)
    if bars is not None and not base:
        trace["error_y"] = bars
    return trace


def _group_note(s: Spread) -> str:
    def group(m: Measurement) -> str:
        emulated = ", emulated" if m.params.get("emulated") else ""
        return f"group {m.params.get('group')}{emulated}"

    if s.count == 1:
        return group(s.mid)
    median = f"median of {s.count} groups" + (f": {group(s.mid)}" if s.measured else "")
    return (
        f"{median}; min {format_value(s.low.value)} "
        f"({group(s.low)}), max {format_value(s.high.value)} ({group(s.high)}) {_UNIT}"
    )


def _size_ticks(sizes: list[int]) -> dict[str, Any]:
    """Ticks at every third power of two within the sizes measured (8 B, 64 B, ... 1 GiB)."""
    if not sizes:
        return {}
    low, high = max(sizes[0], 1), sizes[-1]
    ticks = [2**e for e in range(0, 41, 3) if low <= 2**e <= high]
    if len(ticks) < 3:  # a short sweep (node pairs: a few sizes): the sizes themselves
        ticks = sizes
    return {"tickvals": ticks, "ticktext": [format_bytes(t) for t in ticks]}


def _grid(title: str, by_op: dict[tuple[str, str], dict[int, Spread]], sizes: list[int]) -> Grid:
    keys = list(by_op)
    header = (
        "size",
        *(f"{op} ({dtype})" if len({d for _, d in keys}) > 1 else op for op, dtype in keys),
    )
    rows = [
        (
            format_bytes(size),
            *(format_value(by_op[k][size].mid.value) if size in by_op[k] else "-" for k in keys),
        )
        for size in sizes
    ]
    return Grid(title=f"{title}, {_UNIT}", header=header, rows=rows)


# --- the NCCL tuning sweep ---------------------------------------------------------------------

_SYMBOLS = {
    "default": "diamond",
    "better": "star",
    "slower": "x",
    "inside_noise": "circle",
    "unconfirmed": "circle-open",
    "wrong": "x-open",
    "unjudged": "circle-open",
}
_TUNE_NOTE = (
    "Star: beats the default beyond the noise (one-sided Mann-Whitney p < 0.01 and the 95% "
    "interval of the speed-up above 1 + tune_min_gain); open circle: NCCL's log did not "
    "confirm the setting, not judged; error bars: 95% bootstrap interval of the median; "
    "dashed: the default at each size."
)


def tune_plots(ms: Sequence[Measurement]) -> list[Plot]:
    """One figure per op (and dtype) of the tuning sweep."""
    by_op: dict[tuple[str, str], list[TuneRow]] = {}
    for row in tune_rows(ms):
        by_op.setdefault((row.op, str(row.latency.params.get("dtype"))), []).append(row)
    return [_tune_plot(op, dtype, rows) for (op, dtype), rows in by_op.items()]


def short_setting(r: TuneRow) -> str:
    """The setting as a tick label: default, Tree/LL, channels=16."""
    p = r.latency.params
    if r.kind == "algo_proto":
        return f"{p.get('algo')}/{p.get('proto')}"
    return r.setting


def _tune_plot(op: str, dtype: str, rows: list[TuneRow]) -> Plot:
    labels = list(dict.fromkeys(["default", *(short_setting(r) for r in rows)]))
    sizes = sorted({r.size_bytes for r in rows})
    data: list[Trace] = []
    for size in sizes:
        at = sorted(
            (r for r in rows if r.size_bytes == size), key=lambda r: labels.index(short_setting(r))
        )
        name, hue = format_bytes(size), color(format_bytes(size))
        data.append(_tune_trace(at, name=name, hue=hue))
        default = next((r for r in at if r.kind == "default"), None)
        if default is not None:
            line = reference_line(None, default.latency.value, name=f"default, {name}", unit="us")
            line.update(meta="measurement", legendgroup=name, showlegend=False)
            line["line"]["color"] = hue
            data.append(line)
    title = f"NCCL settings against the default: {op} ({dtype}), time of one op per size"
    fig = figure(
        data,
        layout(
            x=axis("NCCL setting", type="category", categoryorder="array", categoryarray=labels),
            y=axis("time of one op (us, log scale)", type="log"),
        ),
    )
    return Plot(title, fig, table=_tune_grid(title, rows, labels, sizes), notes=[_TUNE_NOTE])


def _tune_trace(rows: list[TuneRow], *, name: str, hue: str) -> Trace:
    values = [r.latency.value for r in rows]
    cis = [r.latency_ci or (v, v) for r, v in zip(rows, values, strict=True)]
    return {
        "type": "scatter",
        "meta": "measurement",
        "mode": "markers",
        "name": name,
        "legendgroup": name,
        "x": [short_setting(r) for r in rows],
        "y": values,
        "marker": {
            "size": 11,
            "color": [MARK_COLOR if r.verdict == "better" else hue for r in rows],
            "symbol": [_SYMBOLS[r.verdict] for r in rows],
            "line": {"color": hue, "width": 1.5},
        },
        "error_y": {
            "type": "data",
            "symmetric": False,
            "color": hue,
            "thickness": 1,
            "width": 3,
            "array": [max(0.0, high - v) for (_, high), v in zip(cis, values, strict=True)],
            "arrayminus": [max(0.0, v - low) for (low, _), v in zip(cis, values, strict=True)],
        },
        "customdata": [[r.setting, _gain_note(r)] for r in rows],
        "hovertemplate": (
            f"%{{customdata[0]}}<br>{name}: median %{{y:.4g}} us<br>%{{customdata[1]}}"
            "<extra></extra>"
        ),
    }


def _gain_note(r: TuneRow) -> str:
    confirmed = "confirmed by NCCL's log" if r.latency.params.get("confirmed") else "NOT confirmed"
    if r.gain is None or r.gain_ci is None:
        return confirmed
    low, high = r.gain_ci
    return f"{r.gain:.2f}x the default's speed (95% CI {low:.2f}-{high:.2f}), {confirmed}"


def _tune_grid(title: str, rows: list[TuneRow], labels: list[str], sizes: list[int]) -> Grid:
    cells = {(short_setting(r), r.size_bytes): r for r in rows}
    body = []
    for label in labels:
        line = [label]
        for size in sizes:
            r = cells.get((label, size))
            gain = f" ({r.gain:.2f}x)" if r is not None and r.gain and r.kind != "default" else ""
            line.append(f"{format_value(r.latency.value)}{gain}" if r is not None else "-")
        body.append(tuple(line))
    header = ("setting", *(format_bytes(s) for s in sizes))
    return Grid(title=f"{title}, us (speed-up over the default)", header=header, rows=body)
