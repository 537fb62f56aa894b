"""Process groups of the collective benchmark: world, per node, per rail, node pairs.

Planning is pure (:func:`plan_groups` over the rank -> node map); :func:`build_groups` then calls
``torch.distributed.new_group`` for every planned group on every rank, in the same order, as
torch requires (a rank outside a group still takes part in creating it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch.distributed as dist

from clusterbench.benchmarks.pair_plan import Round, round_robin
from clusterbench.collective_facts import GROUP_KINDS, GroupKind
from clusterbench.runtime.dist import DistContext

__all__ = [
    "GROUP_KINDS",
    "GroupHandle",
    "GroupKind",
    "GroupSpec",
    "build_groups",
    "build_pair_groups",
    "destroy_groups",
    "node_hosts",
    "plan_groups",
    "round_robin_pairs",
]


@dataclass(frozen=True, slots=True)
class GroupSpec:
    name: str
    """'world', 'node0', 'rail0', 'node0-node1'."""
    kind: GroupKind
    ranks: tuple[int, ...]
    """Global ranks, ascending; group rank i is ranks[i]."""
    hosts: tuple[str, ...] = ()
    """The hosts of a node or node-pair group (empty for world and rails)."""
    nodes: tuple[int, ...] = ()
    """The node indices of a node-pair group (empty for the others)."""


@dataclass(frozen=True, slots=True)
class GroupHandle:
    spec: GroupSpec
    group: Any
    """The ProcessGroup (None for the world: the default group)."""
    group_rank: int

    @property
    def size(self) -> int:
        return len(self.spec.ranks)

    def global_rank(self, group_rank: int) -> int:
        return self.spec.ranks[group_rank % self.size]


def round_robin_pairs(num_nodes: int) -> list[tuple[int, int]]:
    """Every pair of nodes once, ordered in rounds of disjoint pairs (circle method).

    Pairs of one round share no node, so ranks that run the groups in this order measure the
    pairs of a round at the same time.
    """
    return [(min(a, b), max(a, b)) for pairs in round_robin(num_nodes) for a, b in pairs]


def plan_groups(
    kinds: Sequence[GroupKind],
    *,
    node_of_rank: Sequence[int],
    host_of_node: Sequence[str],
    pair_rounds: Sequence[Round] | None = None,
) -> list[GroupSpec]:
    """The groups to measure, in the order every rank creates and runs them.

    Per-node and per-rail groups exist only with several nodes (with one node they equal the
    world); node pairs only with three nodes or more (with two, the pair is the world): the
    pairs of ``pair_rounds`` (a sparse plan's survey, :mod:`.pair_plan`), else every pair.
    Groups of a single rank are dropped.
    """
    num_nodes = len(host_of_node)
    members: list[list[int]] = [[] for _ in range(num_nodes)]
    for rank, node in enumerate(node_of_rank):
        members[node].append(rank)
    out: list[GroupSpec] = []
    for kind in kinds:
        if kind == "world":
            out.append(GroupSpec("world", kind, tuple(range(len(node_of_rank)))))
        elif kind == "intra_node" and num_nodes > 1:
            out += [
                GroupSpec(f"node{i}", kind, tuple(r), (host_of_node[i],))
                for i, r in enumerate(members)
            ]
        elif kind == "inter_node" and num_nodes > 1:
            rails = max(len(m) for m in members)
            out += [
                GroupSpec(f"rail{j}", kind, tuple(m[j] for m in members if j < len(m)))
                for j in range(rails)
            ]
        elif kind == "node_pairs" and num_nodes > 2:
            pairs = (
                round_robin_pairs(num_nodes)
                if pair_rounds is None
                else [(min(a, b), max(a, b)) for r in pair_rounds for a, b in r]
            )
            out += [_pair_spec(a, b, members=members, host_of_node=host_of_node) for a, b in pairs]
    return [g for g in out if len(g.ranks) > 1]


def _pair_spec(
    a: int, b: int, *, members: Sequence[Sequence[int]], host_of_node: Sequence[str]
) -> GroupSpec:
    return GroupSpec(
        f"node{a}-node{b}",
        "node_pairs",
        tuple(sorted([*members[a], *members[b]])),
        (host_of_node[a], host_of_node[b]),
        (a, b),
    )


def node_hosts(ctx: DistContext) -> list[str]:
    """Every node's host, in node order (every rank calls it)."""
    return _layout(ctx)[1]


def _layout(ctx: DistContext) -> tuple[list[int], list[str]]:
    """Every rank's node, and every node's host."""
    layout = ctx.all_gather((ctx.node_rank, ctx.host))
    host_of_node = [""] * max(node for node, _ in layout) + [""]
    for node, host in layout:
        host_of_node[node] = host
    return [n for n, _ in layout], host_of_node


def _create(ctx: DistContext, specs: Sequence[GroupSpec]) -> list[GroupHandle]:
    handles = []
    for spec in specs:
        # Every rank calls new_group for every group, members or not, in the same order.
        group = None if spec.name == "world" else dist.new_group(list(spec.ranks))
        if ctx.rank in spec.ranks:
            handles.append(GroupHandle(spec, group, spec.ranks.index(ctx.rank)))
    return handles


def build_groups(
    ctx: DistContext, kinds: Sequence[GroupKind], *, pair_rounds: Sequence[Round] | None = None
) -> list[GroupHandle]:
    """Plan the groups from every rank's node, create them all, return this rank's."""
    node_of_rank, host_of_node = _layout(ctx)
    specs = plan_groups(
        kinds, node_of_rank=node_of_rank, host_of_node=host_of_node, pair_rounds=pair_rounds
    )
    return _create(ctx, specs)


def build_pair_groups(ctx: DistContext, rounds: Sequence[Round]) -> list[GroupHandle]:
    """The node-pair groups of ``rounds`` (a sparse plan's re-tests), created on every rank."""
    node_of_rank, host_of_node = _layout(ctx)
    members: list[list[int]] = [[] for _ in host_of_node]
    for rank, node in enumerate(node_of_rank):
        members[node].append(rank)
    specs = [
        _pair_spec(min(a, b), max(a, b), members=members, host_of_node=host_of_node)
        for r in rounds
        for a, b in r
    ]
    return _create(ctx, [s for s in specs if len(s.ranks) > 1])


def destroy_groups(handles: Sequence[GroupHandle]) -> None:
    for h in handles:
        if h.group is not None:
            dist.destroy_process_group(h.group)
