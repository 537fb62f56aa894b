"""The drain list: every node or link the node-pair tests judged bad, its evidence, and the
commands that take it out of service under the launcher the run used.

It is built on the slow node pairs' verdicts (collectives busbw per op,
:func:`~clusterbench.judging.pair_series.node_pair_busbw`; TCP throughput per tool
and RDMA write bandwidth,
:func:`~clusterbench.judging.pair_series.directed_pairs`), with the same thresholds,
so it never names what the findings do not:

- a **node** is bad where a series names it the common node of the slow pairs and it is slow
  with at least :data:`MIN_PARTNERS` distinct partners that are not bad themselves: one slow
  pair could be the partner's fault or the link's, two with different partners are the node's;
- a **link** is bad where its pair is slow and neither end is a bad node: both ends measured
  fine with their other partners, so the cable, the ports or the switch path between them is
  at fault, and neither node is drained.

A fleet whose pairs all measure alike has no slow pair and an empty list.  The node-pair plan
each benchmark recorded (``<benchmark>.node_pair_plan``: the rounds, the re-test pairs, the
launcher and each node's name under it) says which slow pairs were re-tests against nodes known
good and how to drain.  Pure: results and thresholds in, a :class:`DrainList` out;
``report.drain`` renders it and writes ``drain.json``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from clusterbench.declared.network import NetworkMetrics
from clusterbench.judging.node_pairs import SlowPairs, format_pair_value
from clusterbench.judging.pair_series import directed_pairs, node_pair_busbw
from clusterbench.schema import Finding, Results
from clusterbench.thresholds import Thresholds

__all__ = ["MIN_PARTNERS", "DrainEntry", "DrainList", "PairEvidence", "drain_list"]

MIN_PARTNERS = 2
"""Distinct partners (not bad themselves) a node must be slow with to be drained."""

_LINK_CHECK = (
    "Check the path between the two nodes, not the nodes: both ends' ports (`ethtool -S "
    "IFACE`, `ibstat`, `perfquery -x`), the cable, and the switch ports and uplinks between "
    "them (their error and discard counters); swap the cable or move the port, then re-test "
    "the pair."
)
_NODE_CHECK = (
    "Before returning it to service: its NIC, cable and switch port (`ethtool IFACE`, "
    "`ibstat`, `ip -s link show IFACE`), MTU and `tc qdisc show`; then re-run the pair tests."
)


@dataclass(frozen=True, slots=True)
class PairEvidence:
    """What one series (an op's busbw, a tool's TCP throughput) says about an entry."""

    measured: str
    """'all_reduce busbw', 'TCP throughput (iperf3)', 'RDMA write bandwidth (ib_write_bw)'."""
    unit: str
    healthy_median: float
    """The healthy pairs' median the slow ones are compared with."""
    slow_pairs: dict[str, float]
    """'node0-node3' (or 'node0->node3') -> its figure."""
    retests: list[str]
    """The slow pairs that were re-tests against nodes known good (the sparse plan's)."""
    partners: int
    """Node: distinct partners it was measured with; link: 1 (each end's other)."""
    slow_partners: int
    """Node: distinct partners it was slow with; link: 1."""
    fine: dict[str, int] = field(default_factory=dict)
    """Link: each end -> its other partners that measured fine in this series."""

    def worst_ratio(self) -> float:
        return min(self.slow_pairs.values()) / self.healthy_median if self.healthy_median else 0


@dataclass(frozen=True, slots=True)
class DrainEntry:
    kind: Literal["node", "link"]
    nodes: tuple[str, ...]
    """The node, or the link's two ends."""
    evidence: list[PairEvidence]
    reason: str
    """One line, e.g. 'all_reduce busbw 0.0046 GB/s with 5 of 5 partners, 0.3% of the ...'."""
    commands: list[str]
    """Shell commands that take the node out of service (none for a link)."""
    check: str


@dataclass(frozen=True, slots=True)
class DrainList:
    judged: bool
    """Node pairs among three or more nodes were measured (else there is no list to give)."""
    launcher: str
    """kubernetes, slurm, mpi, torchrun, clusterbench or none (the run's own record)."""
    hosts: list[str]
    entries: list[DrainEntry]
    hostfile: list[str]
    """The hosts without the drained nodes, one line each (``host slots=N`` under MPI)."""
    plans: list[dict[str, Any]]
    """Each benchmark's node-pair plan: benchmark, strategy, rounds, all_pairs_rounds, seconds."""

    @property
    def nodes(self) -> list[DrainEntry]:
        return [e for e in self.entries if e.kind == "node"]

    @property
    def links(self) -> list[DrainEntry]:
        return [e for e in self.entries if e.kind == "link"]


@dataclass(frozen=True, slots=True)
class _Series:
    measured: str
    unit: str
    directed: bool
    plan: str
    """The benchmark whose plan finding says which pairs were re-tests."""
    pairs: dict[tuple[str, str], float]
    slow: SlowPairs | None


def _series(results: Results, t: Thresholds) -> list[_Series]:
    """Every pair series among three or more nodes, judged with the run's thresholds."""
    limits = {"mads": t.outlier_mads, "min_rel": t.node_pair_min_rel,
              "sigmas": t.outlier_spread_sigmas}  # fmt: skip
    out = []
    for c in node_pair_busbw(results.measurements, **limits):
        values = {p: m.value for p, m in c.pairs.items()}
        out.append(_Series(f"{c.op} busbw", "GB/s", False, "collectives", values, c.slow))
    for d in directed_pairs(results.measurements, **limits):
        tcp = d.metric == NetworkMetrics.tcp_throughput
        what = f"TCP throughput ({d.tool})" if tcp else "RDMA write bandwidth (ib_write_bw)"
        values = {p: m.value for p, m in d.pairs.items()}
        out.append(_Series(what, "Gb/s", True, "network", values, d.slow))
    return [s for s in out if len({n for p in s.pairs for n in p}) > 2]


def _plans(results: Results) -> dict[str, Finding]:
    return {f.id.split(".")[0]: f for f in results.findings if f.id.endswith(".node_pair_plan")}


def _name(pair: tuple[str, str], directed: bool) -> str:
    return ("->" if directed else "-").join(pair)


def _partners(node: str, pairs: Iterable[tuple[str, str]]) -> set[str]:
    return {b if a == node else a for a, b in pairs if node in (a, b)}


def _bad_nodes(series: Sequence[_Series]) -> set[str]:
    """Common nodes of slow pairs, slow with MIN_PARTNERS distinct partners not bad."""
    bad: set[str] = set()
    for s in series:
        if s.slow is None:
            continue
        common = set(s.slow.common_nodes)
        for node in common:
            if len(_partners(node, s.slow.slow) - common) >= MIN_PARTNERS:
                bad.add(node)
    return bad


def _retests(plan: Finding | None) -> set[frozenset[str]]:
    """The sparse plan's re-tests against nodes known good (all pairs measure slow pairs
    again with the same partners: no such evidence)."""
    if plan is None or plan.evidence.get("strategy") != "sparse":
        return set()
    pairs = plan.evidence.get("retest_pairs", [])
    return {frozenset(p) for p in pairs}


def _node_evidence(node: str, s: _Series, retests: set[frozenset[str]]) -> PairEvidence | None:
    assert s.slow is not None
    slow = {p: v for p, v in s.slow.slow.items() if node in p}
    if not slow:
        return None
    return _evidence(s, slow, retests, partners=len(_partners(node, s.pairs)),
                     slow_partners=len(_partners(node, slow)))  # fmt: skip


def _link_evidence(
    link: frozenset[str], s: _Series, retests: set[frozenset[str]]
) -> PairEvidence | None:
    assert s.slow is not None
    slow = {p: v for p, v in s.slow.slow.items() if frozenset(p) == link}
    if not slow:
        return None
    fine = {
        end: len(_partners(end, [p for p in s.pairs if p not in s.slow.slow]) - link)
        for end in sorted(link)
    }
    return _evidence(s, slow, retests, partners=1, slow_partners=1, fine=fine)


def _evidence(
    s: _Series,
    slow: dict[Any, float],
    retests: set[frozenset[str]],
    *,
    partners: int,
    slow_partners: int,
    fine: dict[str, int] | None = None,
) -> PairEvidence:
    """One series' evidence against a node or a link: its ``slow`` pairs, which of them were
    re-tests, against the healthy pairs' median."""
    assert s.slow is not None
    return PairEvidence(
        measured=s.measured,
        unit=s.unit,
        healthy_median=s.slow.baseline,
        slow_pairs={_name(p, s.directed): v for p, v in slow.items()},
        retests=[_name(p, s.directed) for p in slow if frozenset(p) in retests],
        partners=partners,
        slow_partners=slow_partners,
        fine=fine or {},
    )


def _reason(kind: str, first: PairEvidence) -> str:
    """One line of the first series' evidence (a Slurm drain reason, the console's line)."""
    worst = format_pair_value(min(first.slow_pairs.values()))
    median = f"{format_pair_value(first.healthy_median)} {first.unit}"
    share = f"{first.worst_ratio():.1%} of the {median} median"
    if kind == "node":
        return (
            f"{first.measured} down to {worst} {first.unit} with {first.slow_partners} of "
            f"{first.partners} partners, {share}"
        )
    ends = ", ".join(f"{end} fine with {n} others" for end, n in first.fine.items())
    return f"{first.measured} {worst} {first.unit}, {share}; {ends}"


def _commands(launcher: str, host: str, *, names: Mapping[str, str], pods: Sequence[str],
              reason: str) -> list[str]:  # fmt: skip
    """The commands that take ``host`` out of service under ``launcher`` (none where a hostfile
    without it is the way: MPI, torchrun)."""
    name = names.get(host, host)
    if launcher == "slurm":
        text = f"clusterbench: {reason}".replace('"', "'")
        return [f'scontrol update nodename={name} state=drain reason="{text}"']
    if launcher == "kubernetes":
        if host in pods:  # the pod's name is known, its node's is looked up
            name = f"\"$(kubectl get pod {host} -o jsonpath='{{.spec.nodeName}}')\""
        return [
            f"kubectl cordon {name}",
            f"kubectl taint nodes {name} clusterbench=slow-network:NoSchedule",
        ]
    return []


def drain_list(results: Results, thresholds: Thresholds) -> DrainList:
    """Every node and link judged bad by the node-pair tests, with evidence and commands."""
    series = _series(results, thresholds)
    plans = _plans(results)
    facts = next(iter(plans.values())).evidence if plans else {}
    launcher = str(facts.get("launcher") or "none")
    bad = _bad_nodes(series)
    entries = [_node_entry(n, series, plans, facts, launcher=launcher) for n in sorted(bad)]
    links = {frozenset(p) for s in series if s.slow is not None for p in s.slow.slow}
    entries += [
        _link_entry(link, series, plans)
        for link in sorted(links, key=sorted)
        if len(link) == 2 and not link & bad
    ]
    hosts = _hosts(results, series)
    slots = facts.get("slots") or {}
    hostfile = [
        f"{h} slots={slots.get(h, 1)}" if launcher == "mpi" else h for h in hosts if h not in bad
    ]
    return DrainList(
        judged=bool(series),
        launcher=launcher,
        hosts=hosts,
        entries=entries,
        hostfile=hostfile,
        plans=[_plan_summary(name, f) for name, f in plans.items()],
    )


def _node_entry(
    node: str,
    series: Sequence[_Series],
    plans: Mapping[str, Finding],
    facts: Mapping[str, Any],
    *,
    launcher: str,
) -> DrainEntry:
    evidence = [
        e
        for s in series
        if s.slow is not None
        and (e := _node_evidence(node, s, _retests(plans.get(s.plan)))) is not None
    ]
    reason = _reason("node", evidence[0])
    names, pods = dict(facts.get("names") or {}), list(facts.get("pods") or [])
    commands = _commands(launcher, node, names=names, pods=pods, reason=reason)
    return DrainEntry("node", (node,), evidence, reason, commands, _NODE_CHECK)


def _link_entry(
    link: frozenset[str], series: Sequence[_Series], plans: Mapping[str, Finding]
) -> DrainEntry:
    evidence = [
        e
        for s in series
        if s.slow is not None
        and (e := _link_evidence(link, s, _retests(plans.get(s.plan)))) is not None
    ]
    return DrainEntry("link", tuple(sorted(link)), evidence, _reason("link", evidence[0]), [],
                      _LINK_CHECK)  # fmt: skip


def _hosts(results: Results, series: Sequence[_Series]) -> list[str]:
    known = [h.hostname for h in results.hosts]
    measured = sorted({n for s in series for p in s.pairs for n in p} - set(known))
    return [*known, *measured]


def _plan_summary(benchmark: str, plan: Finding) -> dict[str, Any]:
    keys = ("strategy", "num_nodes", "partners", "rounds", "survey_rounds", "retest_rounds",
            "all_pairs_rounds", "seconds", "round_seconds", "suspects")  # fmt: skip
    return {"benchmark": benchmark, **{k: plan.evidence.get(k) for k in keys}}
