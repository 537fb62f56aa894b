"""The intra- to inter-node bandwidth ratio: how much slower a GPU's path off its node is.

The cluster-benchmarking guide (docs/sources.md): inter-node bandwidth is typically 10-20x
slower than intra-node, which is why the network, not NVLink, decides how large models scale.
Stated as info when both sides were measured: intra-node from the collectives within one
node (the world on a one-node run, else the per-node groups), inter-node from the per-rail
collectives or, without them, node-to-node TCP throughput (converted to GB/s).
"""

from __future__ import annotations

import statistics

from clusterbench.benchmarks.collectives import CollectivesMetrics
from clusterbench.benchmarks.network import NetworkMetrics
from clusterbench.schema import Finding, Measurement, Results

__all__ = ["bandwidth_ratio_findings"]


def _largest_all_reduce(ms: list[Measurement]) -> list[Measurement]:
    """Each group's all_reduce at the largest size it measured (a size sweep that stopped at
    the busbw plateau may end at another size in each group)."""
    top: dict[object, Measurement] = {}
    for m in ms:
        if m.params.get("op") != "all_reduce":
            continue
        held = top.get(m.params.get("group"))
        if held is None or _size(m) > _size(held):
            top[m.params.get("group")] = m
    return list(top.values())


def _size(m: Measurement) -> int:
    return int(m.params.get("size_bytes") or 0)


def _intra_node_gbps(results: Results) -> float | None:
    busbw = [m for m in CollectivesMetrics.busbw.select(results)
             if m.params.get("mode") == "back_to_back"]  # fmt: skip
    kind = "intra_node" if results.run.num_nodes > 1 else "world"
    ms = _largest_all_reduce([m for m in busbw if m.params.get("group_kind") == kind])
    return statistics.median(m.value for m in ms) if ms else None


def _inter_node_gbps(results: Results) -> tuple[float, str] | None:
    rails = [m for m in CollectivesMetrics.busbw.select(results)
             if m.params.get("group_kind") == "inter_node"
             and m.params.get("mode") == "back_to_back"]  # fmt: skip
    ms = _largest_all_reduce(rails)
    if ms:
        return statistics.median(m.value for m in ms), "all_reduce busbw across nodes per rail"
    tcp = [m.value for m in NetworkMetrics.tcp_throughput.select(results)
           if not m.params.get("loopback")]  # fmt: skip
    if tcp:
        return statistics.median(tcp) / 8, "TCP throughput between nodes"  # Gb/s -> GB/s
    return None


def bandwidth_ratio_findings(results: Results) -> list[Finding]:
    intra = _intra_node_gbps(results)
    inter = _inter_node_gbps(results)
    if intra is None or inter is None or inter[0] <= 0:
        return []
    ratio = intra / inter[0]
    return [
        Finding(
            id="network.intra_inter_ratio",
            severity="info",
            scope="run",
            message=(
                f"Intra-node all_reduce busbw {intra:.3g} GB/s is {ratio:.3g}x the inter-node "
                f"{inter[0]:.3g} GB/s ({inter[1]}); the cluster-benchmarking guide sees 10-20x on "
                "typical clusters: the larger the ratio, the more scaling across nodes depends "
                "on the network."
            ),
            evidence={
                "intra_node_gbps": intra,
                "inter_node_gbps": inter[0],
                "inter_node_source": inter[1],
                "ratio": round(ratio, 3),
            },
            fix="",
        )
    ]
