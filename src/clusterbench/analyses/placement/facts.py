"""The run's placement facts read back from doctor's per-node findings, and what the
placement verdicts derive from them: the rank order, training's tp / pp groups, the flags.

Pure functions over :class:`~clusterbench.schema.Results`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from clusterbench.analyses.placement.flags import binding_fix
from clusterbench.declared.training import default_world_sizes
from clusterbench.doctor.numa_cpu import format_cpulist
from clusterbench.doctor.placement import FINDING_ID
from clusterbench.schema import Results

__all__ = [
    "Order",
    "ParallelGroup",
    "RankPlacement",
    "binding",
    "by_node",
    "gpu_numa_by_host",
    "launcher_of",
    "placements",
    "rank_order",
    "ranks_text",
    "training_groups",
]

Order = Literal["block", "round-robin", "scattered"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RankPlacement:
    """Where one rank ran, as doctor recorded it (``doctor.placement`` evidence)."""

    rank: int
    local_rank: int
    node: int
    host: str
    gpu: int | None = None
    gpu_numa_node: int | None = None
    cpus: str = ""
    """The rank's CPU affinity (cpulist format)."""
    cpu_numa_nodes: tuple[int, ...] = ()
    """The NUMA nodes those CPUs belong to."""
    nic: str | None = None
    """The RDMA NIC nearest the rank's GPU."""
    nic_numa_node: int | None = None
    nic_distance: str | None = None
    nvlink_domain: tuple[int, ...] | None = None
    """The GPUs of its host that the rank's GPU reaches over NVLink (itself included)."""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RankPlacement:
        domain = row.get("nvlink_domain")
        return cls(
            rank=int(row["rank"]),
            local_rank=int(row["local_rank"]),
            node=int(row["node"]),
            host=str(row["host"]),
            gpu=row.get("gpu"),
            gpu_numa_node=row.get("gpu_numa_node"),
            cpus=str(row.get("cpus", "")),
            cpu_numa_nodes=tuple(row.get("cpu_numa_nodes") or ()),
            nic=row.get("nic"),
            nic_numa_node=row.get("nic_numa_node"),
            nic_distance=row.get("nic_distance"),
            nvlink_domain=tuple(domain) if domain else None,
        )


@dataclass(frozen=True, slots=True)
class ParallelGroup:
    """A process group of a training strategy: ``strategy`` over ``ranks``."""

    strategy: str
    ranks: tuple[int, ...]


def placements(results: Results) -> list[RankPlacement]:
    """Every rank's placement from doctor's per-node findings, by rank ([] without doctor)."""
    rows = [
        RankPlacement.from_row(row)
        for f in results.findings
        if f.id == FINDING_ID
        for row in f.evidence.get("ranks", [])
    ]
    return sorted({p.rank: p for p in rows}.values(), key=lambda p: p.rank)


def launcher_of(results: Results) -> str | None:
    """What started the ranks (torchrun, slurm, mpi, clusterbench), as doctor saw it."""
    found = [f.evidence.get("launcher") for f in results.findings if f.id == FINDING_ID]
    return next((name for name in found if name), None)


def ranks_text(ranks: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    return format_cpulist(ranks)


def by_node(ranks: Iterable[RankPlacement]) -> dict[int, list[int]]:
    """Node index -> its global ranks, sorted."""
    out: dict[int, list[int]] = defaultdict(list)
    for p in ranks:
        out[p.node].append(p.rank)
    return {node: sorted(r) for node, r in sorted(out.items())}


def rank_order(ranks: Sequence[RankPlacement]) -> Order:
    """block: each node's ranks are contiguous; round-robin: rank r sits on the node of rank
    r mod (number of nodes), so consecutive ranks are on different nodes; scattered: else."""
    nodes = by_node(ranks)
    if all(r == list(range(r[0], r[0] + len(r))) for r in nodes.values()):
        return "block"
    node_of = {p.rank: p.node for p in ranks}
    if all(node_of.get(r % len(nodes)) == n for r, n in node_of.items()):
        return "round-robin"
    return "scattered"


def training_groups(config: Mapping[str, Any], world_size: int) -> list[ParallelGroup]:
    """The tp / pp groups the run's training forms (``benchmarks/training/bench.py``): ranks
    0..w-1 at each world size w of the scaling series, and at the largest for the sweep's
    tp / pp cases.  [] when the run has no training or it trains neither."""
    cfg = config.get("benchmarks", {}).get("training")
    if not isinstance(cfg, Mapping):
        return []
    sizes = sorted({int(w) for w in cfg.get("world_sizes") or [] if int(w) <= world_size})
    sizes = sizes or default_world_sizes(world_size)
    wanted = [(cfg.get("strategy"), w) for w in sizes]
    if cfg.get("sweep"):
        wanted += [(s, sizes[-1]) for s in cfg.get("sweep_strategies") or []]
    groups = {(s, w): ParallelGroup(s, tuple(range(w))) for s, w in wanted if s in ("tp", "pp")}
    return [g for _, g in sorted(groups.items()) if len(g.ranks) > 1]


def gpu_numa_by_host(ranks: Iterable[RankPlacement]) -> dict[str, list[int | None]]:
    """Host -> the NUMA node of each local rank's GPU, in local-rank order."""
    out: dict[str, list[tuple[int, int | None]]] = defaultdict(list)
    for p in ranks:
        out[p.host].append((p.local_rank, p.gpu_numa_node))
    return {h: [n for _, n in sorted(v)] for h, v in out.items()}


def binding(results: Results, ranks: Sequence[RankPlacement], *, host: str) -> str:
    """The flags that bind each rank to its GPU's NUMA node, for the run's launcher, with the
    NUMA layout of ``host``."""
    info = next((h for h in results.hosts if h.hostname == host), None)
    numa = gpu_numa_by_host(ranks).get(host, [])
    return binding_fix(launcher_of(results), gpu_numa=numa, host=info)
