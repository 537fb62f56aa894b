"""Host network between nodes: NIC inventory, TCP throughput and latency, RDMA write bandwidth.

Only local rank 0 of each node (its *leader*) measures; every rank joins the gathers and
barriers that order the tests.  Node pairs run in rounds of disjoint pairs, so a node is in
at most one pair per round, each pair once per direction: every pair (a round-robin
tournament), or on many nodes a survey and re-tests of its suspects (:mod:`.pair_plan`).
With one node the TCP test runs over loopback between two threads of rank 0.  Throughput
comes from ``iperf3`` when it is installed on both nodes, else from the standard library's
sockets (:mod:`.tools`); latency is always a socket ping-pong; ``ib_write_bw``
(perftest) runs when installed and both nodes have an ACTIVE RDMA port.  Traffic goes only to
the test's own hosts.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterbench.benchmarks.network import tools as tools
from clusterbench.benchmarks.pair_plan import (
    RETESTS,
    Round,
    resolve_strategy,
    round_robin,
    survey_rounds,
)
from clusterbench.benchmarks.pair_rounds import (
    PairValue,
    PlanRecord,
    agree_retests,
    fleet_facts,
    plan_finding,
)
from clusterbench.hardware.sysfs import RDMA_KINDS, probe_nics
from clusterbench.schema import Finding, Measurement, NicInfo, ParamValue, Reference, Stats

if TYPE_CHECKING:
    from clusterbench.runtime.dist import DistContext
from clusterbench.benchmarks.network.settings import (
    NetworkConfig,
    NetworkMetrics,
)

__all__ = ["network", "round_robin"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class _Node:
    """What a node's leader tells the others."""

    rank: int
    host: str
    address: str
    iface: str | None
    rate_gbps: float | None
    rdma_device: str | None
    """First ACTIVE RDMA port's device, when ib_write_bw is installed."""
    has_iperf3: bool


def network(ctx: DistContext, cfg: NetworkConfig) -> Iterator[Measurement | Finding]:
    """Host network: NIC rates, TCP throughput/latency and RDMA bandwidth between node pairs."""
    me: _Node | None = None
    if ctx.local_rank == 0:
        nics = probe_nics()
        yield from _nic_measurements(ctx, nics)
        me = _describe_node(ctx, cfg, nics=nics)
    nodes: list[_Node] = [n for n in ctx.all_gather(me) if n is not None]
    if len(nodes) == 1:
        ctx.progress.start(1)
        if me is not None:
            yield from _loopback_tests(ctx, cfg, me=me)
        ctx.progress.advance()
        return
    yield from _pair_tests(ctx, cfg, nodes=nodes, me=me)


def _both_ways(rounds: list[Round]) -> list[Round]:
    """Each round, then each round reversed: a link can be slow one way only."""
    return rounds + [[(b, a) for a, b in pairs] for pairs in rounds]


def _pair_tests(
    ctx: DistContext, cfg: NetworkConfig, *, nodes: list[_Node], me: _Node | None
) -> Iterator[Measurement | Finding]:
    """All pairs both ways then their slow pairs again, or the sparse plan's survey both ways
    then the re-tests; rank 0 picks those from the figures measured (:mod:`.pair_rounds`) and
    records the plan."""
    k = len(nodes)
    strategy = resolve_strategy(cfg.node_pairs, num_nodes=k, partners=cfg.pair_partners)
    survey = survey_rounds(k, cfg.pair_partners) if strategy == "sparse" else round_robin(k)
    facts = fleet_facts(ctx)
    schedule = _both_ways(survey)
    ctx.progress.start(len(schedule) + (2 * RETESTS if k > 2 else 0))
    ctx.barrier()
    started = time.perf_counter()
    mine: list[PairValue] = []
    for done, pairs in enumerate(schedule):
        if done and ctx.budget.agree_expired(ctx):  # rank 0 decides for every node
            ctx.budget.stopped(done=done, total=len(schedule), unit="rounds of node pairs")
            break
        for m in _run_round(ctx, cfg, nodes=nodes, pairs=pairs, me=me):
            mine += _pair_values(m, nodes)
            yield m
        ctx.progress.advance()
    retests: list[Round] = []
    suspects: list[int] = []
    if k > 2 and ctx.budget.stop is None:
        retests, suspects = agree_retests(
            ctx, strategy=strategy, num_nodes=k, survey=survey, mine=mine
        )
        for pairs in _both_ways(retests):
            yield from _run_round(ctx, cfg, nodes=nodes, pairs=pairs, me=me)
            ctx.progress.advance()
    ctx.barrier()
    if ctx.rank == 0 and k > 2:  # two nodes give no verdict on pairs (and no drain list)
        plan = PlanRecord(
            strategy=strategy, partners=cfg.pair_partners, hosts=[n.host for n in nodes],
            survey=survey, retests=retests, suspects=suspects,
            seconds=time.perf_counter() - started, directed=True,
        )  # fmt: skip
        yield plan_finding(ctx.benchmark, plan, facts)


def _pair_values(m: Measurement, nodes: list[_Node]) -> list[PairValue]:
    """A throughput test as the survey value of its (metric, tool) series; latency none."""
    if m.metric not in (NetworkMetrics.tcp_throughput.name, NetworkMetrics.rdma_write_bw.name):
        return []
    index = {n.host: i for i, n in enumerate(nodes)}
    src, dst = index.get(str(m.params.get("src_host"))), index.get(str(m.params.get("dst_host")))
    if src is None or dst is None:
        return []
    return [((m.metric, m.params.get("tool")), (src, dst), m.value)]


# --- inventory -----------------------------------------------------------------------------


def _nic_measurements(ctx: DistContext, nics: list[NicInfo]) -> Iterator[Measurement]:
    for nic in nics:
        label = f"{nic.name}/{nic.port}" if nic.port is not None else nic.name
        up = (nic.state or "").upper() in ("ACTIVE", "UP")
        if up and not nic.rate_gbps:
            log.info("network: %s on %s reports no link rate (virtual NIC?)", label, ctx.host)
            continue
        # a port that is down often has no readable rate: 0, with its state in params
        yield ctx.measurement(
            NetworkMetrics.nic_rate,
            value=nic.rate_gbps or 0.0,
            params={
                "nic": label,
                "kind": nic.kind,
                "state": nic.state,
                "link_layer": nic.link_layer,
            },
        )


def _describe_node(ctx: DistContext, cfg: NetworkConfig, *, nics: list[NicInfo]) -> _Node:
    address = tools.local_address(cfg.bind_address, peer=os.environ.get("MASTER_ADDR"))
    iface = tools.interface_of(address)
    rate = next((n.rate_gbps for n in nics if n.name == iface and n.rate_gbps), None)
    active = [n for n in nics if n.kind in RDMA_KINDS and (n.state or "").upper() == "ACTIVE"]
    rdma = active[0].name if active and cfg.rdma and tools.which("ib_write_bw") else None
    if not active:
        log.info("network: no ACTIVE RDMA port on %s; ib_write_bw skipped", ctx.host)
    elif rdma is None:
        log.info("network: ib_write_bw (perftest) not installed on %s; skipped", ctx.host)
    return _Node(
        rank=ctx.rank,
        host=ctx.host,
        address=address,
        iface=iface,
        rate_gbps=rate,
        rdma_device=rdma,
        has_iperf3=tools.which("iperf3") is not None,
    )


# --- tests ---------------------------------------------------------------------------------


def _use_iperf3(cfg: NetworkConfig, *nodes: _Node) -> bool:
    have = all(n.has_iperf3 for n in nodes)
    if cfg.tool == "iperf3" and not have:
        raise RuntimeError("network: tool=iperf3 but iperf3 is not on PATH of every node")
    return cfg.tool != "socket" and have


def _loopback_tests(ctx: DistContext, cfg: NetworkConfig, *, me: _Node) -> Iterator[Measurement]:
    local = _Node(
        rank=me.rank,
        host=me.host,
        address="127.0.0.1",
        iface=None,
        rate_gbps=None,
        rdma_device=None,
        has_iperf3=me.has_iperf3,
    )
    servers = tools.start_servers(
        "127.0.0.1", iperf3=_use_iperf3(cfg, local), rdma_device=None, timeout_s=_timeout(cfg)
    )
    try:
        yield from _client_tests(ctx, cfg, src=local, dst=local, ports=servers.ports)
    finally:
        servers.stop()


def _run_round(
    ctx: DistContext,
    cfg: NetworkConfig,
    *,
    nodes: list[_Node],
    pairs: list[tuple[int, int]],
    me: _Node | None,
) -> Iterator[Measurement]:
    """One round: destinations start their servers, ports are shared, sources measure."""
    role = {n: (s, d) for s, d in pairs for n in (s, d)}
    mine = next((i for i, n in enumerate(nodes) if me is not None and n.rank == me.rank), None)
    servers = None
    if mine is not None and mine in role and role[mine][1] == mine:
        src, dst = nodes[role[mine][0]], nodes[mine]
        both_rdma = bool(src.rdma_device and dst.rdma_device)
        servers = tools.start_servers(
            dst.address,
            iperf3=_use_iperf3(cfg, src, dst),
            rdma_device=dst.rdma_device if both_rdma else None,
            timeout_s=_timeout(cfg),
        )
    try:
        ports = ctx.all_gather(servers.ports if servers else None)
        if mine is not None and mine in role and role[mine][0] == mine:
            src, dst = nodes[mine], nodes[role[mine][1]]
            yield from _client_tests(ctx, cfg, src=src, dst=dst, ports=ports[dst.rank])
        ctx.barrier()
    finally:
        if servers is not None:
            servers.stop()


def _client_tests(
    ctx: DistContext, cfg: NetworkConfig, *, src: _Node, dst: _Node, ports: tools.Ports
) -> Iterator[Measurement]:
    loopback = src.rank == dst.rank
    params: dict[str, ParamValue] = {
        "src_host": src.host,
        "dst_host": dst.host,
        "loopback": loopback,
    }
    if ports.iperf3 is not None:
        result = tools.iperf3_client(
            dst.address, port=ports.iperf3, streams=cfg.streams, duration_s=cfg.duration_s
        )
    else:
        result = tools.socket_throughput(
            dst.address, port=ports.socket, streams=cfg.streams, duration_s=cfg.duration_s
        )
    yield ctx.measurement(
        NetworkMetrics.tcp_throughput,
        value=result.gbps,
        params={**params, "streams": cfg.streams, "tool": result.tool},
        stats=Stats.from_samples(result.interval_gbps) if result.interval_gbps else None,
        reference=_link_reference(src, dst),
    )
    rtts = tools.socket_latency_us(dst.address, port=ports.socket, rounds=cfg.latency_round_trips)
    stats = Stats.from_samples(rtts)
    yield ctx.measurement(
        NetworkMetrics.tcp_latency_us, value=stats.median, params=params, stats=stats
    )
    if ports.rdma is not None and src.rdma_device and dst.rdma_device:
        gbps = tools.ib_write_bw_client(
            dst.address, port=ports.rdma, device=src.rdma_device, timeout_s=_timeout(cfg)
        )
        rdma_params: dict[str, ParamValue] = {
            **params,
            "nic": src.rdma_device,
            "peer_nic": dst.rdma_device,
        }
        yield ctx.measurement(NetworkMetrics.rdma_write_bw, value=gbps, params=rdma_params)


def _link_reference(src: _Node, dst: _Node) -> Reference | None:
    """The slower end's link rate, when both ends report one."""
    if src.rate_gbps is None or dst.rate_gbps is None or src.rank == dst.rank:
        return None
    return Reference(
        value=min(src.rate_gbps, dst.rate_gbps),
        kind="link_rate",
        source=f"sysfs link speed of {src.host}:{src.iface} and {dst.host}:{dst.iface}",
    )


def _timeout(cfg: NetworkConfig) -> float:
    return cfg.duration_s + 60.0
