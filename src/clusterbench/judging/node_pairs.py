"""The slow node among node pairs: which pairs fall behind, and the node they have in common.

Generic over what was measured: collective busbw between two nodes (undirected pairs), TCP
or RDMA bandwidth from one node to another (directed pairs).  A bad node sits in k-1 of the
k(k-1)/2 undirected pairs (2(k-1) of the k(k-1) directed ones), half or more of them with
k <= 4 nodes, so the pairs' own median can be slow.  Each node is therefore scored by the
median value of its pairs; a node whose score is an outlier (by the rule of
:func:`~clusterbench.judging.peers.robust_outliers`: ``mads`` scaled MADs, ``min_rel`` and
``sigmas`` repeat spreads below the median score) is a common node.  The slow pairs are those
that are out themselves against the pairs without a bad node: below their median by the same
three limits, and nearer to the bad node's score than to that median (a pair of the culprit
that measures like the healthy pairs is not slow).  With no bad node, the slow pairs are the
outliers among the pairs.  Higher values are better.

A pair's spread is the CV of its repeats where the caller has one (``spread``); the noise band
pools it with the others' CVs, so on a machine whose pairs vary by 30% from repeat to
repeat a pair at 0.6 of the median is noise and one at 0.01 is not.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from clusterbench.judging.peers import (
    MIN_PEERS,
    SCALED_MAD,
    SPREAD_SIGMAS,
    outside_noise,
    pooled_cv,
    robust_outliers,
)
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
    slow_cv: dict[Pair, float | None] = field(default_factory=dict)
    """The CV of each slow pair's repeats (None: none known)."""
    baseline_cv: float | None = None
    """The pooled CV of the pairs the slow ones are compared with (None: none known)."""


def slow_node_pairs(
    pair_value: Mapping[Pair, float],
    *,
    mads: float,
    min_rel: float,
    spread: Mapping[Pair, float | None] | None = None,
    sigmas: float = SPREAD_SIGMAS,
) -> SlowPairs | None:
    """The pairs that fall behind the others and their common node; None when none does.

    ``pair_value`` maps (node, node) to a higher-is-better figure; pairs may be directed
    (src, dst) or undirected.  ``spread`` gives a pair's CV over its repeats where known.
    Fewer than three nodes give no verdict (no majority to judge by).
    """
    values = dict(pair_value)
    cvs = {p: (spread or {}).get(p) for p in values}
    per_node: dict[str, list[Pair]] = defaultdict(list)
    for pair in values:
        for node in set(pair):
            per_node[node].append(pair)
    node_score = {node: statistics.median(values[p] for p in ps) for node, ps in per_node.items()}
    node_cv = {node: pooled_cv(cvs[p] for p in ps) for node, ps in per_node.items()}
    bad_nodes = robust_outliers(
        node_score, mads=mads, min_rel=min_rel, better="higher", spread=node_cv, sigmas=sigmas
    )
    if bad_nodes:
        healthy = [p for p in values if not set(p) & set(bad_nodes)]
        reference = healthy or list(values)
        base = statistics.median(values[p] for p in healthy) if healthy else max(values.values())
        base_cv = pooled_cv(cvs[p] for p in reference)
        slow_level = max(node_score[n] for n in bad_nodes)
        slow = _slow_against_healthy(
            values, cvs, healthy=[values[p] for p in healthy], base=base, base_cv=base_cv,
            slow_level=slow_level, mads=mads, min_rel=min_rel, sigmas=sigmas,
        )  # fmt: skip
    else:
        slow = robust_outliers(
            values, mads=mads, min_rel=min_rel, better="higher", spread=cvs, sigmas=sigmas
        )
        base = statistics.median(values.values()) if values else 0.0
        base_cv = pooled_cv(cvs.values())
    if not slow:
        return None
    return SlowPairs(
        slow={p: values[p] for p in slow},
        common_nodes=sorted(bad_nodes) or _most_common_node(slow),
        baseline=base,
        num_pairs=len(values),
        slow_cv={p: cvs[p] for p in slow},
        baseline_cv=base_cv,
    )


def _slow_against_healthy(
    values: Mapping[Pair, float],
    cvs: Mapping[Pair, float | None],
    *,
    healthy: list[float],
    base: float,
    base_cv: float | None,
    slow_level: float,
    mads: float,
    min_rel: float,
    sigmas: float,
) -> list[Pair]:
    """The pairs out against the healthy pairs' median ``base``: ``min_rel`` below it, beyond
    the noise of the repeats, ``mads`` scaled MADs of the healthy pairs below it (where there
    are enough of them to have a MAD) and nearer to the bad node's ``slow_level`` than to it."""
    if base <= 0:
        return []
    scaled_mad = 0.0
    if len(healthy) >= MIN_PEERS:
        scaled_mad = SCALED_MAD * statistics.median(abs(v - base) for v in healthy)
    midpoint = (base + slow_level) / 2
    return [
        p
        for p, v in values.items()
        if (base - v) / base >= min_rel
        and base - v > mads * scaled_mad
        and v < midpoint
        and outside_noise(v, base, cvs[p], base_cv, better="higher", sigmas=sigmas)
    ]


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
    noise = (
        f" (beyond the noise: the healthy pairs' repeats vary by {found.baseline_cv:.0%})"
        if found.baseline_cv is not None
        else ""
    )
    return Finding(
        id=finding_id,
        severity="fail",
        scope=f"host:{common[0]}" if len(common) == 1 else "run",
        message=(
            f"{measured} between node pairs: {shown}, below the "
            f"{format_pair_value(found.baseline)} {unit} of the healthy pairs{noise}{where}."
        ),
        evidence={
            **(evidence or {}),
            "measured": measured,
            "unit": unit,
            "slow_pairs": {names[p]: v for p, v in found.slow.items()},
            "healthy_median": found.baseline,
            "common_nodes": common,
            "num_pairs": found.num_pairs,
            "slow_pairs_cv": {names[p]: cv for p, cv in found.slow_cv.items()},
            "healthy_cv": found.baseline_cv,
        },
        fix=fix,
    )
