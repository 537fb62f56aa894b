"""Figures of the tests' own for the HTML report: the kinds the report draws (bars, log-axis
lines, a heatmap, stacked bars), made straight from measurements so that a test can check
the page's embedded data against results.json value by value.

``own_figures(results)`` gives, for every benchmark of ``results``, plots from its
measurements (bars and lines draw measurement values as they are, the heatmap as ``z``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from clusterbench.schema import Measurement, Results
from clusterbench.views.cells import Grid
from clusterbench.views.plots import Plot

__all__ = ["heatmap", "own_figures", "values_by_metric"]


def values_by_metric(ms: list[Measurement]) -> dict[str, list[Measurement]]:
    out: dict[str, list[Measurement]] = defaultdict(list)
    for m in ms:
        out[m.metric].append(m)
    return out


def _bars(title: str, ms: list[Measurement], *, multi_host: bool) -> Plot:
    labels = [f"{m.host}/{m.device}" if multi_host else m.device for m in ms]
    unit = ms[0].unit
    figure: dict[str, Any] = {
        "data": [{"type": "bar", "x": labels, "y": [m.value for m in ms], "name": ms[0].metric}],
        "layout": {"yaxis": {"title": {"text": f"{ms[0].metric}, {unit}"}}},
    }
    table = Grid(
        title=f"{title}, {unit}",
        header=("where", unit),
        rows=[(label, f"{m.value:.4g}") for label, m in zip(labels, ms, strict=True)],
    )
    return Plot(title=title, figure=figure, table=table)


def _lines(title: str, ms: list[Measurement]) -> Plot:
    """Value against size_bytes (log axis), one line per op and mode."""
    by_op: dict[str, list[Measurement]] = defaultdict(list)
    for m in ms:
        by_op[f"{m.params.get('op')} {m.params.get('mode')}"].append(m)
    traces = []
    for op, group in by_op.items():
        group.sort(key=lambda m: int(m.params["size_bytes"] or 0))
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": op,
                "x": [m.params["size_bytes"] for m in group],
                "y": [m.value for m in group],
            }
        )
    layout = {
        "xaxis": {"type": "log", "title": {"text": "message size, bytes"}},
        "yaxis": {"title": {"text": f"{ms[0].metric}, {ms[0].unit}"}},
    }
    return Plot(title=title, figure={"data": traces, "layout": layout}, notes=["log axis"])


def heatmap(title: str, ms: list[Measurement]) -> Plot:
    """sender x receiver heatmap of ``src_host`` -> ``dst_host`` values."""
    hosts = sorted(
        {str(m.params["src_host"]) for m in ms} | {str(m.params["dst_host"]) for m in ms}
    )
    cell = {(str(m.params["src_host"]), str(m.params["dst_host"])): m.value for m in ms}
    z = [[cell.get((src, dst)) for dst in hosts] for src in hosts]
    figure = {
        "data": [
            {
                "type": "heatmap",
                "x": hosts,
                "y": hosts,
                "z": z,
                "colorbar": {"title": {"text": ms[0].unit}},
            }
        ],
        "layout": {"yaxis": {"autorange": "reversed"}},
    }
    return Plot(title=title, figure=figure)


def _stacked(title: str, by_metric: dict[str, list[Measurement]]) -> Plot:
    traces = []
    for metric in ("compute", "memory", "communication", "coordination"):
        ms = sorted(by_metric.get(metric, []), key=lambda m: m.rank)
        traces.append(
            {"type": "bar", "name": metric, "x": [m.rank for m in ms], "y": [m.value for m in ms]}
        )
    layout = {"barmode": "stack", "yaxis": {"title": {"text": "share of the step, %"}}}
    return Plot(title=title, figure={"data": traces, "layout": layout})


def own_figures(results: Results) -> dict[str, list[Plot]]:
    """Plots for every benchmark of ``results``, made from its measurements."""
    by_benchmark: dict[str, list[Measurement]] = defaultdict(list)
    for m in results.measurements:
        by_benchmark[m.benchmark].append(m)
    multi_host = len({m.host for m in results.measurements}) > 1
    plots: dict[str, list[Plot]] = {}
    for name, ms in by_benchmark.items():
        by_metric = values_by_metric(ms)
        if name == "collectives":
            world = [m for m in by_metric["busbw"] if m.params.get("group") == "world"]
            plots[name] = [_lines("busbw against message size, world", world)]
        elif name == "network" and "tcp_throughput" in by_metric:
            plots[name] = [
                heatmap("TCP throughput, sender x receiver", by_metric["tcp_throughput"])
            ]
        elif name == "attribution":
            plots[name] = [_stacked("where each rank's step goes", by_metric)]
        else:
            metric, chosen = next(iter(by_metric.items()))
            plots[name] = [_bars(f"{name} {metric}", chosen[:600], multi_host=multi_host)]
    return plots
