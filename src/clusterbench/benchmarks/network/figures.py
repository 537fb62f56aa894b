"""Network figures: TCP throughput (and RDMA write bandwidth where measured) between nodes as
sender x receiver heatmaps with the slow node that analysis names marked, and the TCP round
trip the same way (lower is better; analysis judges no slow node on it)."""

from __future__ import annotations

from clusterbench.benchmarks.network import NetworkMetrics
from clusterbench.benchmarks.pair_figures import node_pair_plot
from clusterbench.judging.pair_series import directed_pairs
from clusterbench.schema import Measurement
from clusterbench.views.plots import Plot, PlotContext

__all__ = ["figures"]


def figures(ms: list[Measurement], ctx: PlotContext) -> list[Plot]:
    t = ctx.thresholds
    plots = []
    for series in directed_pairs(
        ms, mads=t.outlier_mads, min_rel=t.node_pair_min_rel, sigmas=t.outlier_spread_sigmas
    ):
        if series.metric == NetworkMetrics.tcp_throughput:
            tool = f" ({series.tool})" if series.tool else ""
            title, what = f"TCP throughput between nodes{tool}", "TCP throughput"
        else:
            title, what = "RDMA write bandwidth between nodes (ib_write_bw)", "RDMA write"
        plots.append(
            node_pair_plot(
                title=f"{title}, rows: sender, columns: receiver",
                what=what,
                pairs=series.pairs,
                slow=series.slow,
                directed=True,
                finding_id="network.slow_node_pair",
            )
        )
    latency = _best_latency(ms)
    if latency:
        plots.append(
            node_pair_plot(
                title="TCP latency between nodes, median round trip of 64 B, rows: sender, "
                "columns: receiver",
                what="round trip",
                pairs=latency,
                slow=None,
                directed=True,
                finding_id=None,
                lower_is_better=True,
            )
        )
    return plots


def _best_latency(ms: list[Measurement]) -> dict[tuple[str, str], Measurement]:
    """The lowest round trip per (sender, receiver) between two nodes."""
    out: dict[tuple[str, str], Measurement] = {}
    for m in NetworkMetrics.tcp_latency_us.select(ms):
        pair = (str(m.params.get("src_host")), str(m.params.get("dst_host")))
        if m.params.get("loopback") or pair[0] == pair[1]:
            continue
        if pair not in out or m.value < out[pair].value:
            out[pair] = m
    return dict(sorted(out.items()))
