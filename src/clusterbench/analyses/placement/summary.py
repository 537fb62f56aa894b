"""The one info finding that sums the run's placement up: rank order, training's groups, the
ranks doctor found off their GPU's NUMA node (``doctor.numa.affinity``, summed up here, not
judged again) with the flags that bind them, and what that advice rests on.

The cost of running off the GPU's NUMA node is quoted where this run measured it: transfer's
pinned copies from the remote NUMA node next to the local ones (GPUs), or doctor's CPU copy
across NUMA nodes (hosts with two or more).  Without either the advice rests on the topology
alone, and the finding says so.  The binding is advice of basis ``topology``
(:mod:`.advice`): the cost quoted is of a copy, not of the job, so no gain is claimed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from clusterbench.analyses.placement.facts import (
    ParallelGroup,
    RankPlacement,
    binding,
    by_node,
    launcher_of,
    rank_order,
    ranks_text,
)
from clusterbench.declared.doctor import NUMA_FINDING_ID as REMOTE_COPY_ID
from clusterbench.declared.transfer import TransferMetrics
from clusterbench.judging.advice import advice_evidence
from clusterbench.schema import Finding, Measurement, Results

__all__ = ["AFFINITY_ID", "numa_cost", "summary_finding"]

AFFINITY_ID = "doctor.numa.affinity"


def _pairs(
    ms: Sequence[Measurement], key: tuple[str, ...]
) -> list[tuple[Measurement, Measurement]]:
    """(local, remote) measurement pairs of the same host, device and ``key`` params."""
    by_case: dict[tuple[Any, ...], dict[Any, Measurement]] = defaultdict(dict)
    for m in ms:
        case = (m.host, m.device, *(m.params.get(k) for k in key))
        by_case[case][m.params.get("numa")] = m
    return [
        (c["local"], c["remote"])
        for c in by_case.values()
        if {"local", "remote"} <= set(c) and c["local"].value > 0
    ]


def _remote_copy(results: Results) -> dict[str, Any] | None:
    """Doctor's CPU copy across NUMA nodes with the largest loss, as numa_cost gives it."""
    found = [f for f in results.findings if f.id == REMOTE_COPY_ID and f.evidence.get("local")]
    if not found:
        return None
    worst = max(found, key=lambda f: f.evidence.get("loss", 0))
    return {
        "source": "doctor",
        "host": worst.scope.removeprefix("host:"),
        "device": "CPU",
        "what": "CPU copy",
        "local_gbps": worst.evidence["local"]["median"],
        "remote_gbps": worst.evidence["remote"]["median"],
        "loss": worst.evidence["loss"],
    }


def numa_cost(results: Results) -> dict[str, Any] | None:
    """The largest measured loss from running on another NUMA node in this run: transfer's
    pinned host<->device copies (GPUs), else doctor's CPU copy; None when neither ran."""
    transfer = [
        m for m in TransferMetrics.bandwidth.select(results) if m.params.get("memory") == "pinned"
    ]
    pairs = _pairs(transfer, ("direction", "size_bytes"))
    if not pairs:
        return _remote_copy(results)
    local, remote = max(pairs, key=lambda p: 1 - p[1].value / p[0].value)
    return {
        "source": "transfer",
        "host": local.host,
        "device": local.device,
        "what": f"pinned {local.params.get('direction')}",
        "local_gbps": local.value,
        "remote_gbps": remote.value,
        "loss": round(1 - remote.value / local.value, 4),
    }


def _basis(results: Results, cost: dict[str, Any] | None) -> str:
    if cost is not None:
        return (
            f"measured in this run ({cost['source']}, {cost['host']} {cost['device']}): "
            f"{cost['what']} from the other NUMA node {cost['remote_gbps']:.1f} GB/s against "
            f"{cost['local_gbps']:.1f} GB/s on its own ({cost['loss']:.0%} less)"
        )
    nodes = max((len(h.cpu.numa_nodes) for h in results.hosts), default=0)
    if nodes == 1:
        return "not measured: one NUMA node per host, so no rank can run off its node"
    if nodes == 0:
        return "not measured: the hosts' NUMA nodes are unknown (no sysfs node list)"
    return (
        "not measured in this run: the advice rests on the topology (the GPUs' NUMA nodes "
        "from sysfs); transfer measures the cost on GPUs (numa_remote)"
    )


def _affinity_ranks(results: Results, ranks: Sequence[RankPlacement]) -> list[RankPlacement]:
    """The ranks doctor's affinity check found off their GPU's NUMA node."""
    rank_at = {(p.host, p.local_rank): p for p in ranks}
    off = []
    for f in results.findings:
        if f.id != AFFINITY_ID:
            continue
        host = f.scope.removeprefix("host:").split("/")[0]
        found = rank_at.get((host, f.evidence.get("local_rank", -1)))
        if found is not None:
            off.append(found)
    return sorted(off, key=lambda p: p.rank)


def _groups_text(ranks: Sequence[RankPlacement], groups: Sequence[ParallelGroup]) -> str:
    node_of = {p.rank: p.node for p in ranks}
    parts = []
    for strategy in sorted({g.strategy for g in groups}):
        spans = [(len(g.ranks), len({node_of.get(r) for r in g.ranks})) for g in groups
                 if g.strategy == strategy]  # fmt: skip
        parts.append(f"training {strategy} groups of " + ", ".join(
            f"{size} on {n} node{'s' if n > 1 else ''}" for size, n in spans
        ))  # fmt: skip
    return "; ".join(parts)


def _affinity_text(ranks: Sequence[RankPlacement], off: list[RankPlacement]) -> str:
    if off:
        return (
            f"rank(s) {ranks_text(p.rank for p in off)} run off their GPU's NUMA node "
            f"({AFFINITY_ID})"
        )
    if all(p.gpu is None for p in ranks):
        return "CPU ranks: no GPU NUMA node to bind to"
    return "no rank off its GPU's NUMA node"


def summary_finding(
    results: Results, ranks: Sequence[RankPlacement], *, groups: Sequence[ParallelGroup]
) -> Finding:
    """The layout in one info finding; its fix binds the ranks doctor found off their GPU's
    NUMA node, for the launcher that started the run."""
    launcher = launcher_of(results)
    nodes = by_node(ranks)
    off = _affinity_ranks(results, ranks)
    cost = numa_cost(results)
    basis = _basis(results, cost)
    head = f"{len(ranks)} rank(s) on {len(nodes)} node(s), {rank_order(ranks)} rank order"
    parts = [head + (f" ({launcher})" if launcher else ""), _groups_text(ranks, groups),
             _affinity_text(ranks, off), f"NUMA cost {basis}"]  # fmt: skip
    fix, advice = "", {}
    if off:
        flags = binding(results, ranks, host=off[0].host)
        fix = f"{flags} [cost {basis}]"
        why = f"{_affinity_text(ranks, off)}; NUMA cost {basis}"
        advice = advice_evidence(
            change=flags, gain=None, gain_of="", basis="topology", evidence=why
        )
    return Finding(
        id="placement.layout",
        severity="info",
        scope="run",
        message="; ".join(p for p in parts if p) + ".",
        evidence={
            "launcher": launcher,
            "order": rank_order(ranks),
            "ranks_by_node": {str(n): ranks_text(r) for n, r in nodes.items()},
            "off_gpu_numa": [p.rank for p in off],
            "numa_cost": cost,
            "basis": basis,
            **advice,
        },
        fix=fix,
    )
