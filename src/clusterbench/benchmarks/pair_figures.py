"""The node-pair heatmap of collectives (busbw, undirected pairs) and network (TCP and RDMA,
sender -> receiver), with the slow node that analysis names marked."""

from __future__ import annotations

from clusterbench.judging.node_pairs import SlowPairs, format_pair_value
from clusterbench.schema import Measurement
from clusterbench.views.cells import Matrix
from clusterbench.views.figures import (
    figure,
    heatmap,
    heatmap_layout,
    mark_cells,
    mark_node,
)
from clusterbench.views.plots import Plot

__all__ = ["MAX_MARKED_PAIRS", "node_pair_plot"]

MAX_MARKED_PAIRS = 200
"""Beyond this many slow pairs only their common node is outlined."""
_LISTED = 8
"""Slow pairs the note names; the table beside the figure has every pair's value."""


def node_pair_plot(
    *,
    title: str,
    what: str,
    pairs: dict[tuple[str, str], Measurement],
    slow: SlowPairs | None,
    directed: bool,
    finding_id: str | None,
    lower_is_better: bool = False,
) -> Plot:
    """``pairs``: (a, b) -> its measurement (sender, receiver when ``directed``); ``slow``:
    analysis' verdict on them, marked; ``finding_id`` the finding that verdict raises."""
    unit = next(iter(pairs.values())).unit
    cells: dict[tuple[str, str], float] = {}
    for (a, b), m in pairs.items():
        cells[(a, b)] = m.value
        if not directed:
            cells[(b, a)] = m.value
    nodes = sorted({node for pair in cells for node in pair})
    rates = {m.reference.value if m.reference else None for m in pairs.values()}
    rate = rates.pop() if len(rates) == 1 else None
    row_title, column_title = ("sender", "receiver") if directed else ("node", "node")
    trace = heatmap(
        rows=nodes,
        columns=nodes,
        cells=cells,
        unit=unit,
        what=what,
        row_title=row_title,
        column_title=column_title,
        lower_is_better=lower_is_better,
        reference=rate,
    )
    fig_layout = heatmap_layout(
        row_title=f"{row_title} (node)" if directed else "node",
        column_title=f"{column_title} (node)" if directed else "node",
        num_rows=len(nodes),
        num_columns=len(nodes),
    )
    notes = []
    if slow is not None:
        _mark(fig_layout, slow, nodes=nodes, directed=directed)
        notes.append(_slow_note(slow, unit=unit, directed=directed, finding_id=finding_id))
    elif len(nodes) >= 3 and finding_id is not None:
        notes.append("No slow node: no pair falls behind the others.")
    matrix = Matrix(
        title=title,
        unit=unit,
        devices=nodes,
        cells=cells,
        reference=rate,
        reference_label="link",
        corner=f"{row_title} \\ {column_title}" if directed else "node",
    )
    return Plot(title, figure([trace], fig_layout), table=matrix, notes=notes)


def _mark(layout: dict[str, object], slow: SlowPairs, *, nodes: list[str], directed: bool) -> None:
    shapes: list[object] = []
    annotations: list[object] = []
    for node in slow.common_nodes:
        if node in nodes:
            marks = mark_node(node, nodes, text=f"slow node: {node}")
            shapes += marks["shapes"]
            annotations += marks["annotations"]
    if len(slow.slow) <= MAX_MARKED_PAIRS:
        pairs = list(slow.slow)
        shapes += mark_cells(pairs if directed else pairs + [(b, a) for a, b in pairs], nodes)
    layout["shapes"] = shapes
    layout["annotations"] = annotations
    margin = layout.get("margin")
    if annotations and isinstance(margin, dict):
        margin["t"] = 90  # room for the annotation above the first row


def _slow_note(slow: SlowPairs, *, unit: str, directed: bool, finding_id: str | None) -> str:
    sep = "→" if directed else "–"
    listed = list(slow.slow.items())
    shown = ", ".join(f"{sep.join(p)} {format_pair_value(v)} {unit}" for p, v in listed[:_LISTED])
    if len(listed) > _LISTED:
        shown += f" and {len(listed) - _LISTED} more (the table has them all)"
    common = ", ".join(slow.common_nodes)
    who = (
        f"Marked: {common}, the node the slow pairs share"
        if common
        else "Marked: the slow pairs (no node common to them)"
    )
    source = f" ({finding_id})" if finding_id else ""
    return (
        f"{who}{source}. Slow pairs: {shown}; the healthy pairs' median is "
        f"{format_pair_value(slow.baseline)} {unit}."
    )
