"""The slow node among node pairs: which pairs fall behind, and the node they have in common.

Generic over what was measured: collective busbw between two nodes (undirected pairs), TCP
or RDMA bandwidth from one node to another (directed pairs).  A bad node sits in k-1 of the
k(k-1)/2 undirected pairs (2(k-1) of the k(k-1) directed ones), half or more of them with
k <= 4 nodes, so the pairs' own median can be slow.  Each node is therefore scored by the
median value of its pairs; a node whose score is an outlier (``mads`` scaled MADs and
``min_rel`` below the median score) is a common node, and the slow pairs are those ``min_rel``
below the median of the pairs without a bad node (or, with no bad node, outliers among the
pairs).  Higher values are better.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from clusterbench.analysis.outliers import robust_outliers
from clusterbench.schema import Finding

__all__ = ["SlowPairs", "format_pair_value", "slow_node_pairs", "slow_pair_finding"]

Pair = tuple[str, str]
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class SlowPairs:
    """The outcome of :func:`slow_node_pairs`."""

    slow: dict[Pair, float]
    """The slow pairs and their values, in the order they were given."""
    common_nodes: list[str]
    """The node(s) the slow pairs share: outlier nodes, else the most frequent (may be empty)."""
    baseline: float
    """The healthy pairs' median, what the slow pairs are compared with."""
    num_pairs: int
    """Pairs scored in all."""


def slow_node_pairs(
    pair_value: Mapping[Pair, float], *, mads: float, min_rel: float
) -> SlowPairs | None:
    """The pairs that fall behind the others and their common node; None when none does.

    ``pair_value`` maps (node, node) to a higher-is-better figure; pairs may be directed
    (src, dst) or undirected.  Fewer than three nodes give no verdict (no majority to judge by).
    """
    values = dict(pair_value)
    per_node: dict[str, list[float]] = defaultdict(list)
    for pair, value in values.items():
        for node in set(pair):
            per_node[node].append(value)
    node_score = {node: statistics.median(v) for node, v in per_node.items()}
    bad_nodes = robust_outliers(node_score, mads=mads, min_rel=min_rel, better="higher")
    if bad_nodes:
        healthy = [v for p, v in values.items() if not set(p) & set(bad_nodes)]
        base = statistics.median(healthy) if healthy else max(values.values())
        slow = [p for p, v in values.items() if base > 0 and (base - v) / base >= min_rel]
    else:
        slow = robust_outliers(values, mads=mads, min_rel=min_rel, better="higher")
        base = statistics.median(values.values()) if values else 0.0
    if not slow:
        return None
    return SlowPairs(
        slow={p: values[p] for p in slow},
        common_nodes=sorted(bad_nodes) or _most_common_node(slow),
        baseline=base,
        num_pairs=len(values),
    )


def _most_common_node(slow_pairs: list[Pair]) -> list[str]:
    counts = Counter(node for pair in slow_pairs for node in set(pair))
    top = max(counts.values())
    return sorted(node for node, c in counts.items() if c == top and c > 1)


def format_pair_value(value: float) -> str:
    """One decimal from 1 up, 3 significant digits below: a 40 Mbit/s link is 0.00466 GB/s."""
    return f"{value:.1f}" if abs(value) >= 1 else f"{value:.3g}"


def slow_pair_finding(
    found: SlowPairs,
    *,
    finding_id: str,
    measured: str,
    unit: str,
    fix: str,
    directed: bool,
    evidence: Mapping[str, Any] | None = None,
) -> Finding:
    """A fail naming the slow pairs and their common node; ``measured`` says what was measured
    ("all_reduce busbw", "TCP throughput (iperf3)"), ``evidence`` adds to the standard keys."""
    sep = "->" if directed else "-"
    names = {pair: sep.join(pair) for pair in found.slow}
    shown = ", ".join(f"{names[p]} {format_pair_value(v)} {unit}" for p, v in found.slow.items())
    common = found.common_nodes
    where = f"; common node: {', '.join(common)}" if common else ""
    return Finding(
        id=finding_id,
        severity="fail",
        scope=f"host:{common[0]}" if len(common) == 1 else "run",
        message=(
            f"{measured} between node pairs: {shown}, below the "
            f"{format_pair_value(found.baseline)} {unit} of the healthy pairs{where}."
        ),
        evidence={
            **(evidence or {}),
            "measured": measured,
            "unit": unit,
            "slow_pairs": {names[p]: v for p, v in found.slow.items()},
            "healthy_median": found.baseline,
            "common_nodes": common,
            "num_pairs": found.num_pairs,
        },
        fix=fix,
    )
