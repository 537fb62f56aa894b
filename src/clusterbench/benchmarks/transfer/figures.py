"""Transfer figures: host<->device copy bandwidth against the PCIe link rate, and the GPU->GPU
copy bandwidth of every ordered pair as a heatmap (one-way and bidirectional)."""

from __future__ import annotations

from clusterbench.benchmarks.transfer import TransferMetrics
from clusterbench.benchmarks.transfer.section import best_p2p
from clusterbench.schema import Measurement
from clusterbench.views.cells import Grid, Matrix, format_value, param
from clusterbench.views.figures import (
    DIRECTION_COLORS,
    Spread,
    axis,
    bar_trace,
    color,
    figure,
    heatmap,
    heatmap_layout,
    layout,
    median_note,
    reference_lines,
    spreads_by,
)
from clusterbench.views.plots import Plot, PlotContext

__all__ = ["figures"]

_UNIT = "GB/s"


def figures(ms: list[Measurement], ctx: PlotContext) -> list[Plot]:
    plots = [p for p in [_host_copies(ms, ctx)] if p is not None]
    pairs = TransferMetrics.p2p_bandwidth.select(ms)
    for mode in ("oneway", "bidir"):
        plot = _p2p(pairs, mode=mode)
        if plot is not None:
            plots.append(plot)
    return plots


def _case(m: Measurement) -> str:
    return f"{param(m, 'memory')}, NUMA {param(m, 'numa')}"


def _host_copies(ms: list[Measurement], ctx: PlotContext) -> Plot | None:
    copies = TransferMetrics.bandwidth.select(ms)
    if not copies:
        return None
    by_direction: dict[str, dict[str, Spread]] = {}
    for (direction, case), s in spreads_by(
        copies, lambda m: (param(m, "direction"), _case(m))
    ).items():
        by_direction.setdefault(str(direction), {})[case] = s
    all_spreads = [s for cells in by_direction.values() for s in cells.values()]
    data = [
        bar_trace(
            direction,
            cells,
            unit=_UNIT,
            color_=color(direction, DIRECTION_COLORS),
            multi_host=ctx.multi_host,
        )
        for direction, cells in by_direction.items()
    ]
    data += reference_lines(all_spreads, unit=_UNIT, what="PCIe")
    fig = figure(
        data,
        layout(
            x=axis("host memory and NUMA placement", type="category"),
            y=axis(f"copy bandwidth ({_UNIT})", rangemode="tozero"),
            barmode="group",
        ),
    )
    rows: list[tuple[str, ...]] = [
        (
            direction,
            case,
            format_value(s.mid.value),
            format_value(s.mid.reference.value) if s.mid.reference else "-",
            f"{s.mid.value / s.mid.reference.value:.0%}" if s.mid.reference else "-",
            str(s.count),
        )
        for direction, cells in by_direction.items()
        for case, s in cells.items()
    ]
    header = ("direction", "case", _UNIT, "PCIe link rate", "% of link", "devices")
    table = Grid(title=f"host<->device copy bandwidth, {_UNIT}", header=header, rows=rows)
    title = "PCIe host↔device copy bandwidth (h2d, d2h)"
    return Plot(title, fig, table=table, notes=median_note(all_spreads))


def _p2p(pairs: list[Measurement], *, mode: str) -> Plot | None:
    """Per ordered pair, the best over sizes on each host, and the worst host's value drawn:
    a slow link on one node of many stays visible."""
    best = best_p2p(pairs, mode=mode)
    if not best:
        return None
    worst: dict[tuple[str, str], Measurement] = {}
    for (_, src, dst), m in best.items():
        if (src, dst) not in worst or m.value < worst[(src, dst)].value:
            worst[(src, dst)] = m
    devices = sorted({d for pair in worst for d in pair})
    num_hosts = len({host for host, _, _ in best})
    refs = [m.reference.value for m in worst.values() if m.reference]
    reference = max(refs) if refs else None
    notes = {
        pair: f"{m.host}"
        + ("; no peer access (copies through the host)" if param(m, "p2p_access") is False else "")
        for pair, m in worst.items()
    }
    cells = {pair: m.value for pair, m in worst.items()}
    trace = heatmap(
        rows=devices,
        columns=devices,
        cells=cells,
        unit=_UNIT,
        what=f"{mode} copy",
        row_title="source",
        column_title="destination",
        notes=notes,
        reference=reference,
    )
    fig = figure(
        [trace],
        heatmap_layout(
            row_title="source GPU",
            column_title="destination GPU",
            num_rows=len(devices),
            num_columns=len(devices),
        ),
    )
    hosts_note = f", the slowest of {num_hosts} hosts per pair" if num_hosts > 1 else ""
    matrix = Matrix(
        title=f"GPU→GPU copy, {mode} (rows: source, columns: destination){hosts_note}",
        unit=_UNIT,
        devices=devices,
        cells=cells,
        no_peer_access=frozenset(p for p, m in worst.items() if param(m, "p2p_access") is False),
        reference=reference,
    )
    lines = [f"Each cell is the pair's best over the sizes copied{hosts_note}."]
    if reference:
        lines.append(
            f"The colour scale runs from 0 to the NVLink spec, {format_value(reference)} "
            f"{_UNIT} {'both ways' if mode == 'bidir' else 'one way'}."
        )
    return Plot(f"GPU↔GPU copy bandwidth, {mode}", fig, table=matrix, notes=lines)
