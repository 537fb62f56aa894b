"""Placement verdicts over the whole run: the rank layout against the topology.

Doctor records each node's facts (``doctor.placement``: per rank its node, GPU, NUMA nodes,
CPUs, nearest NIC and NVLink domain; :mod:`.placement_facts` reads them back); this module
checks

- the rank order: a node's global ranks contiguous (block) or interleaved across nodes;
- training's tensor/pipeline-parallel groups (ranks 0..w-1 at each world size w, as
  ``benchmarks/training/bench.py`` forms them) that cross a node or an NVLink domain;
- ranks whose CPUs are on another NUMA node than their GPU's nearest RDMA NIC;

and :mod:`.placement_summary` sums the layout up in one info finding, with doctor's own
affinity verdict (``doctor.numa.affinity``, not repeated) and the flags that fix it.  Each
fix is advice (:mod:`.advice`) of basis ``topology``: the layout shows it, no gain is measured.

Pure functions: a :class:`~clusterbench.schema.Results` in, findings out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from clusterbench.analyses.placement.facts import (
    ParallelGroup,
    RankPlacement,
    binding,
    by_node,
    launcher_of,
    placements,
    rank_order,
    ranks_text,
    training_groups,
)
from clusterbench.analyses.placement.flags import block_order_fix
from clusterbench.analyses.placement.summary import summary_finding
from clusterbench.judging.advice import advice_evidence
from clusterbench.schema import Finding, Results, Severity

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = [
    "findings",
    "group_findings",
    "nic_findings",
    "order_finding",
    "run_placements",
    "topology_advice",
]


def topology_advice(change: str, why: str) -> dict[str, Any]:
    """``change`` as advice from the layout alone (no gain): ``why`` is what the layout shows."""
    return advice_evidence(change=change, gain=None, gain_of="", basis="topology", evidence=why)


def order_finding(ranks: Sequence[RankPlacement], launcher: str | None) -> Finding | None:
    """Global ranks that interleave the nodes -> warn (consecutive ranks form the groups)."""
    order = rank_order(ranks)
    if order == "block":
        return None
    nodes = by_node(ranks)
    hosts = {p.node: p.host for p in ranks}
    layout = {hosts[n]: ranks_text(r) for n, r in nodes.items()}
    text = "; ".join(f"{host}: ranks {r}" for host, r in layout.items())
    fix = block_order_fix(launcher, ranks_per_node=max(len(r) for r in nodes.values()))
    why = f"global ranks {order} across {len(nodes)} nodes ({text})"
    return Finding(
        id="placement.rank_order",
        severity="warn",
        scope="run",
        message=(
            f"Global ranks interleave the nodes ({order}: {text}): consecutive ranks, which "
            "form tensor/pipeline-parallel groups (ranks 0..w-1) and rank-ordered rings, "
            "cross the network where one node's ranks would do."
        ),
        evidence={"order": order, "ranks_by_host": layout, **topology_advice(fix, why)},
        fix=fix,
    )


# ----------------------------------------------------------------------------- training groups


def _min_nodes(size: int, ranks_per_node: Sequence[int]) -> int:
    """The fewest nodes that hold ``size`` ranks (largest nodes first)."""
    held, count = 0, 0
    for n in sorted(ranks_per_node, reverse=True):
        if held >= size:
            break
        held, count = held + n, count + 1
    return count


def _span(
    group: ParallelGroup, node_of: Mapping[int, int], per_node: Sequence[int]
) -> dict[str, Any]:
    nodes = sorted({node_of[r] for r in group.ranks if r in node_of})
    return {"size": len(group.ranks), "ranks": ranks_text(group.ranks), "nodes": nodes,
            "min_nodes": _min_nodes(len(group.ranks), per_node)}  # fmt: skip


def _group_finding(
    what: str, rows: list[dict[str, Any]], *, severity: Severity, message: str, fix: str
) -> Finding:
    """``what``: ``tp_group`` (the rank order's doing), ``tp_group_size``, ``tp_group_nvlink``,
    ``pp_group``: the finding's id after ``placement.``."""
    strategy = what.split("_")[0]
    sizes = ", ".join(str(r["size"]) for r in rows)
    return Finding(
        id=f"placement.{what}",
        severity=severity,
        scope="run",
        message=f"Training's {strategy} group(s) of {sizes} ranks (ranks 0..w-1) {message}",
        evidence={
            "strategy": strategy,
            "groups": rows,
            **topology_advice(fix, f"training's {strategy} group(s) of {sizes} ranks {message}"),
        },
        fix=fix,
    )


def group_findings(
    ranks: Sequence[RankPlacement], groups: Sequence[ParallelGroup], launcher: str | None
) -> list[Finding]:
    """Groups spanning more nodes than hold them -> warn (the rank order's doing); tp groups
    larger than a node -> info; tp groups of one node across its NVLink domains -> warn."""
    node_of = {p.rank: p.node for p in ranks}
    per_node = [len(r) for r in by_node(ranks).values()]
    out = []
    for strategy in sorted({g.strategy for g in groups}):
        spans = [_span(g, node_of, per_node) for g in groups if g.strategy == strategy]
        avoidable = [s for s in spans if len(s["nodes"]) > s["min_nodes"]]
        if avoidable:
            out.append(_group_finding(
                f"{strategy}_group", avoidable, severity="warn",
                message="span more nodes than hold them at this rank order: their traffic "
                "crosses the network where a node's own ranks would do.",
                fix=block_order_fix(launcher, ranks_per_node=max(per_node)),
            ))  # fmt: skip
        too_big = [s for s in spans if s["min_nodes"] > 1 and s not in avoidable]
        if strategy == "tp" and too_big:
            out.append(_group_finding(
                "tp_group_size", too_big, severity="info",
                message=f"span several nodes (a node holds {max(per_node)}): every layer's "
                "all-reduces cross the network, in the scaling figures of those sizes too.",
                fix=f"keep tensor parallelism within a node (tp <= {max(per_node)}) and scale "
                "across nodes with data or pipeline parallelism",
            ))  # fmt: skip
    nvlink = _nvlink_finding(ranks, [g for g in groups if g.strategy == "tp"])
    return out + ([nvlink] if nvlink is not None else [])


def _nvlink_finding(
    ranks: Sequence[RankPlacement], groups: Sequence[ParallelGroup]
) -> Finding | None:
    """tp groups inside one node whose GPUs lie in several NVLink domains -> warn."""
    by_rank = {p.rank: p for p in ranks}
    rows, largest = [], 0
    for g in groups:
        members = [by_rank[r] for r in g.ranks if r in by_rank]
        domains = {p.nvlink_domain for p in members}
        if len({p.node for p in members}) != 1 or len(domains) < 2 or not any(domains):
            continue
        largest = max(largest, *(len(d) for d in domains if d))
        text = " / ".join(ranks_text(d) if d else "none" for d in sorted(domains, key=str))
        rows.append({"size": len(g.ranks), "ranks": ranks_text(g.ranks),
                     "host": members[0].host, "nvlink_domains": text})  # fmt: skip
    if not rows:
        return None
    return _group_finding(
        "tp_group_nvlink", rows, severity="warn",
        message=f"span NVLink domains of one node (GPUs {rows[0]['nvlink_domains']} on "
        f"{rows[0]['host']}): their all-reduces between domains go over PCIe and the CPU "
        "interconnect.",
        fix=f"keep tensor parallelism within an NVLink domain (tp <= {largest})",
    )  # fmt: skip


# ----------------------------------------------------------------------------- NIC


def nic_findings(results: Results, ranks: Sequence[RankPlacement]) -> list[Finding]:
    """Ranks whose CPUs are all off the NUMA node of their GPU's nearest RDMA NIC -> warn."""
    off = [
        p
        for p in ranks
        if p.nic_numa_node is not None
        and p.cpu_numa_nodes
        and p.nic_numa_node not in p.cpu_numa_nodes
    ]
    if not off:
        return []
    fix = binding(results, ranks, host=off[0].host)
    far = sorted({p.gpu for p in off if p.gpu is not None and p.gpu_numa_node != p.nic_numa_node})
    if far:
        fix = (
            f"GPU(s) {ranks_text(far)} have no RDMA NIC on their own NUMA node: use one on "
            f"the GPU's socket or PCIe switch where there is one (NCCL_IB_HCA); bind the "
            f"ranks: {fix}"
        )
    rows = [
        {"rank": p.rank, "host": p.host, "gpu": p.gpu, "nic": p.nic,
         "nic_numa_node": p.nic_numa_node, "cpu_numa_nodes": list(p.cpu_numa_nodes),
         "gpu_numa_node": p.gpu_numa_node}
        for p in off
    ]  # fmt: skip
    return [
        Finding(
            id="placement.nic_numa",
            severity="warn",
            scope="run",
            message=(
                f"Rank(s) {ranks_text(p.rank for p in off)} run on other NUMA nodes than "
                "their GPU's nearest RDMA NIC: NCCL's network proxy thread and its host "
                "buffers cross the CPU interconnect."
            ),
            evidence={
                "ranks": rows,
                **topology_advice(
                    fix,
                    f"rank(s) {ranks_text(p.rank for p in off)} off the NUMA "
                    "node of their GPU's nearest RDMA NIC",
                ),
            },
            fix=fix,
        )
    ]


def run_placements(results: Results, run: RunView) -> list[RankPlacement]:
    """The placement run part's analysis: every rank's placement (:func:`placements`)."""
    return placements(results)


def findings(results: Results, run: RunView) -> list[Finding]:
    """Every placement verdict of the run ([] without doctor's facts), from the placement run
    part's analysis (``run.part``)."""
    ranks: list[RankPlacement] = run.part("placement")
    if not ranks:
        return []
    launcher = launcher_of(results)
    groups = training_groups(results.run.config, results.run.world_size)
    order = order_finding(ranks, launcher)
    return [
        *([order] if order is not None else []),
        *group_findings(ranks, groups, launcher),
        *nic_findings(results, ranks),
        summary_finding(results, ranks, groups=groups),
    ]
