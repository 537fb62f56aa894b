"""The price of a slow node or link (the drain list, :mod:`.drain`), at the GPU count priced.

- **Drained**, a node leaves its share of the priced cluster's nodes idle until it is
  repaired: f = 1 / nodes (basis ``capacity``).
- **Kept** in a synchronous job, every step's inter-node collectives move at the pace of the
  slowest link in the ring: the scaling model (:mod:`.prediction`) at the GPU count priced,
  with the inter-node bandwidth per node cut to the slow pairs' worst ratio to the healthy
  median, against the same model at full bandwidth: f = 1 - E_slow / E (basis ``predicted``;
  not priced without a prediction).  A slow link is priced kept only: neither end is drained.

Pure: no I/O.
"""

from __future__ import annotations

import math

from clusterbench.analyses.cost.findings import PricedFinding, Unpriced, wasted_fraction
from clusterbench.analyses.cost.scale import AtScale
from clusterbench.analyses.drain.drain_list import DrainEntry, drain_list
from clusterbench.analyses.prediction.predict import NoPrediction, predict
from clusterbench.schema import Results, one_round
from clusterbench.thresholds import Thresholds

__all__ = ["price_slow_nodes"]


def _ratio(entry: DrainEntry) -> float:
    """The slow pairs' worst figure against the healthy median, over every series."""
    return min(e.worst_ratio() for e in entry.evidence)


def _kept(results: Results, entry: DrainEntry, at: AtScale) -> PricedFinding | Unpriced:
    what = f"node {entry.nodes[0]}" if entry.kind == "node" else f"link {'-'.join(entry.nodes)}"
    p, ratio = at.prediction, _ratio(entry)
    if p is None:
        return Unpriced(
            f"drain.{entry.kind}",
            what,
            "no scaling prediction of the run (it "
            "needs training and collectives) to say what a slow link costs a job",
        )
    if not ratio > 0:
        return Unpriced(f"drain.{entry.kind}", what, "its slowest pair moved nothing")
    full = next(r for r in p.rows if r.world_size == at.gpus and r.strategy == p.strategies[0])
    try:
        slow = predict(
            results,
            gpu_counts=[at.gpus],
            gpus_per_node=at.gpus_per_node,
            nic_gbps=p.inter_node_gbps * ratio,
            strategies=[p.strategies[0]],
            target=at.target_efficiency,
        )
    except (NoPrediction, ValueError, ArithmeticError) as exc:
        return Unpriced(f"drain.{entry.kind}", what, f"no prediction with its bandwidth: {exc}")
    e_slow, e_full = slow.rows[0].step.efficiency, full.step.efficiency
    return PricedFinding(
        finding_id=f"drain.{entry.kind}",
        scope=what,
        basis="predicted",
        fraction=wasted_fraction(e_slow, e_full),
        statement=(
            f"keeping {what} in the job ({entry.reason}): every step at {e_slow:.0%} "
            f"efficiency at {at.gpus} GPUs (predicted; {e_full:.0%} at full bandwidth)"
        ),
        verb="costs",
        note=(
            f"inter-node bandwidth x {ratio:.3g}: {p.inter_node_gbps:,.0f} -> "
            f"{p.inter_node_gbps * ratio:,.3g} Gb/s per node; 1 - {e_slow:.3f} / {e_full:.3f}"
        ),
    )


def _drained(entry: DrainEntry, at: AtScale) -> PricedFinding:
    nodes = max(1, math.ceil(at.gpus / at.gpus_per_node))
    return PricedFinding(
        finding_id="drain.node",
        scope=f"node {entry.nodes[0]}",
        basis="capacity",
        fraction=1 / nodes,
        statement=(
            f"draining node {entry.nodes[0]} (1 of the {nodes} nodes idle until it is repaired)"
        ),
        verb="costs",
        note=f"1 / {nodes} nodes of {at.gpus_per_node} GPUs",
    )


def price_slow_nodes(
    results: Results, at: AtScale, thresholds: Thresholds
) -> list[PricedFinding | Unpriced]:
    """Each node of the drain list drained and kept, each slow link kept."""
    dl = drain_list(one_round(results), thresholds)
    out: list[PricedFinding | Unpriced] = []
    for entry in dl.entries:
        if entry.kind == "node":
            out.append(_drained(entry, at))
        out.append(_kept(results, entry, at))
    return out
