"""The node-pair series the benchmarks' findings and the drain list both judge: the collectives'
busbw between two nodes per op and dtype (:func:`node_pair_busbw`), and TCP throughput per tool
and RDMA write bandwidth from one node to another (:func:`directed_pairs`), each with the slow
node among the pairs (:func:`~clusterbench.judging.node_pairs.slow_node_pairs`).  Pure
functions: measurements in, series out."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from clusterbench.declared.collectives import CollectivesMetrics
from clusterbench.declared.network import NetworkMetrics
from clusterbench.judging.node_pairs import SlowPairs, slow_node_pairs
from clusterbench.judging.peers import SPREAD_SIGMAS, pooled_cv, repeat_cv
from clusterbench.metrics import Metric
from clusterbench.schema import Measurement

__all__ = [
    "DirectedPairs",
    "NodePairBusbw",
    "busbw_at_largest_size",
    "busbw_by_size",
    "directed_pairs",
    "node_pair_busbw",
    "size_bytes",
]


def size_bytes(m: Measurement) -> int:
    """A collective measurement's ``size_bytes`` (0 where it records none)."""
    size = m.params.get("size_bytes")
    return size if isinstance(size, int) else 0


def busbw_by_size(ms: list[Measurement]) -> dict[tuple[Any, ...], list[Measurement]]:
    """Per (op, group, dtype), the back-to-back busbw at each size measured, ascending by size
    (the best where the group measured a size twice: a node pair the sparse plan measured
    again).  A group of one rank moves nothing over a link (busbw 0, or a copy within the
    GPU): not judged."""
    by_size: dict[tuple[Any, ...], dict[int, Measurement]] = defaultdict(dict)
    for m in ms:
        ranks = m.params.get("group_size")
        if m.params.get("mode") != "back_to_back" or (isinstance(ranks, int) and ranks < 2):
            continue
        sizes = by_size[(m.params.get("op"), m.params.get("group"), m.params.get("dtype"))]
        held = sizes.get(size_bytes(m))
        if held is None or m.value > held.value:
            sizes[size_bytes(m)] = m
    return {key: [sizes[s] for s in sorted(sizes)] for key, sizes in by_size.items()}


def busbw_at_largest_size(ms: list[Measurement]) -> dict[tuple[Any, ...], Measurement]:
    """Per (op, group, dtype), the back-to-back busbw at the largest size measured
    (:func:`busbw_by_size`'s last)."""
    return {key: series[-1] for key, series in busbw_by_size(ms).items()}


@dataclass(frozen=True, slots=True)
class NodePairBusbw:
    """One op's busbw between node pairs: what the collectives' slow-node-pair finding judges."""

    op: str
    dtype: str
    pairs: dict[tuple[str, str], Measurement]
    """(node, node) -> its back-to-back busbw at the largest size that pair measured."""
    spread: dict[tuple[str, str], float | None]
    """Each pair's repeat CV (its blocking or graph timing's where back-to-back has none)."""
    slow: SlowPairs | None
    """The slow pairs and their common node (:func:`slow_node_pairs`); None when none is."""


def node_pair_busbw(
    measurements: Iterable[Measurement],
    *,
    mads: float,
    min_rel: float,
    sigmas: float = SPREAD_SIGMAS,
) -> list[NodePairBusbw]:
    """Per op and dtype, the node pairs' busbw at the largest size and the slow node among them
    (scored by :func:`~clusterbench.judging.node_pairs.slow_node_pairs`).

    A pair's spread is the CV of its repeats at that op and size: back-to-back timing is one
    sample, so the blocking (or graph) timing of the same pair, op and size stands in for it."""
    pairs = [
        m
        for m in CollectivesMetrics.busbw.select(measurements)
        if m.params.get("group_kind") == "node_pairs" and m.params.get("hosts")
    ]
    siblings: dict[tuple[Any, ...], list[float | None]] = defaultdict(list)
    for m in pairs:
        siblings[_pair_key(m)].append(repeat_cv(m))
    by_op: dict[tuple[str, str], dict[tuple[str, str], Measurement]] = defaultdict(dict)
    spread: dict[tuple[str, str], dict[tuple[str, str], float | None]] = defaultdict(dict)
    for m in busbw_at_largest_size(pairs).values():
        hosts = str(m.params.get("hosts")).split(",")
        if len(hosts) == 2:
            key, pair = (str(m.params.get("op")), str(m.params.get("dtype"))), (hosts[0], hosts[1])
            by_op[key][pair] = m
            own = repeat_cv(m)
            spread[key][pair] = own if own is not None else pooled_cv(siblings[_pair_key(m)])
    out = []
    for (op, dtype), op_pairs in by_op.items():
        found = slow_node_pairs(
            {p: m.value for p, m in op_pairs.items()},
            mads=mads, min_rel=min_rel, spread=spread[(op, dtype)], sigmas=sigmas,
        )  # fmt: skip
        out.append(NodePairBusbw(op, dtype, op_pairs, spread[(op, dtype)], found))
    return out


def _pair_key(m: Measurement) -> tuple[Any, ...]:
    """What a node pair's timings in different modes share: op, dtype, nodes and size."""
    return (m.params.get("op"), m.params.get("dtype"), m.params.get("hosts"), size_bytes(m))


@dataclass(frozen=True, slots=True)
class DirectedPairs:
    """One metric's figures between nodes, measured by one tool: what the network's
    slow-node-pair finding judges."""

    metric: Metric
    tool: str
    """iperf3 or socket for TCP ('' where none is recorded)."""
    pairs: dict[tuple[str, str], Measurement]
    """(src_host, dst_host) -> the pair's best measurement, sorted by pair."""
    slow: SlowPairs | None
    """The slow pairs and their common node (:func:`slow_node_pairs`); None when none is."""


def directed_pairs(
    measurements: Iterable[Measurement],
    *,
    mads: float,
    min_rel: float,
    sigmas: float = SPREAD_SIGMAS,
) -> list[DirectedPairs]:
    """TCP throughput and RDMA write bandwidth between nodes, per tool, with the slow node among
    the directed pairs.  Loopback tests are left out, and TCP pairs are compared only with
    pairs measured by the same tool (iperf3 and the socket test differ).  A pair's spread is
    the CV of its test's intervals (iperf3 reports one a second: a 1-second test has none, and
    is judged by ``mads`` and ``min_rel`` alone)."""
    measurements = list(measurements)
    out = []
    for metric in (NetworkMetrics.tcp_throughput, NetworkMetrics.rdma_write_bw):
        for tool, pairs in _directed_pairs(measurements, metric=metric).items():
            found = slow_node_pairs(
                {p: m.value for p, m in pairs.items()},
                mads=mads, min_rel=min_rel, spread={p: repeat_cv(m) for p, m in pairs.items()},
                sigmas=sigmas,
            )  # fmt: skip
            out.append(DirectedPairs(metric, tool, pairs, found))
    return out


def _directed_pairs(
    measurements: Iterable[Measurement], *, metric: Metric
) -> dict[str, dict[tuple[str, str], Measurement]]:
    """Per tool, the best measurement of each (src_host, dst_host) pair between two nodes."""
    by_tool: dict[str, dict[tuple[str, str], Measurement]] = defaultdict(dict)
    for m in metric.select(measurements):
        src, dst = str(m.params.get("src_host")), str(m.params.get("dst_host"))
        if m.params.get("loopback") or src == dst:
            continue
        held = by_tool[str(m.params.get("tool") or "")]
        if (src, dst) not in held or m.value > held[(src, dst)].value:
            held[(src, dst)] = m
    return {tool: dict(sorted(pairs.items())) for tool, pairs in by_tool.items()}
