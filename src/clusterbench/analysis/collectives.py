"""Verdicts on the collectives benchmark: wrong results, low busbw, the slow node in node pairs.

busbw is compared with the *unidirectional* peak of the link the group crosses (nccl-tests,
REFERENCE.md): within one node the SKU's NVLink per-direction spec; across nodes each GPU's share
of its node's NICs, ``sum(NIC Gb/s) / 8 / GPUs per node`` (the rails of a node share its NICs).
Only back-to-back timings at the largest size measured are judged (the busbw plateau).
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from typing import Any

from clusterbench.analysis._common import select
from clusterbench.analysis.outliers import robust_zscores
from clusterbench.schema import Finding, HostInfo, Measurement, Results

__all__ = [
    "BUSBW_MIN_EFFICIENCY",
    "collective_findings",
    "inter_node_peak_gbps",
    "low_busbw_findings",
    "node_pair_findings",
    "wrong_result_findings",
]

BUSBW_MIN_EFFICIENCY = 0.80
"""busbw below this fraction of the link's one-way peak -> warn (seed: links >= 80%)."""
_NIC_KINDS = frozenset({"infiniband", "roce", "efa", "ethernet"})
_DOWN_STATES = frozenset({"down", "disabled", "polling", "init", "armed", "dormant"})
_BENCH = "collectives"


def collective_findings(results: Results, thresholds: Any) -> list[Finding]:
    """Every collectives finding: wrong results (fail), low busbw (warn), slow node pair (fail)."""
    min_eff = float(getattr(thresholds, "busbw_min_efficiency", BUSBW_MIN_EFFICIENCY))
    return [
        *wrong_result_findings(results),
        *low_busbw_findings(results, min_efficiency=min_eff),
        *node_pair_findings(
            results,
            mads=float(getattr(thresholds, "outlier_mads", 3.0)),
            min_rel=float(getattr(thresholds, "outlier_min_rel", 0.05)),
        ),
    ]


def wrong_result_findings(results: Results) -> list[Finding]:
    """Any wrong output element (nccl-tests #wrong > 0) -> fail, per op and group."""
    out = []
    for m in select(results, benchmark=_BENCH, metric="num_wrong"):
        if m.value <= 0:
            continue
        op, group = m.params.get("op"), m.params.get("group")
        out.append(
            Finding(
                id="collectives.wrong_results",
                severity="fail",
                scope=f"group:{group}",
                message=(
                    f"{op} on group {group} produced {m.value:.0f} wrong elements over its size "
                    "sweep: the collective corrupts data."
                ),
                evidence={
                    "op": op,
                    "group": group,
                    "num_wrong": m.value,
                    "dtype": m.params.get("dtype"),
                },
                fix=(
                    "Rerun with NCCL_DEBUG=WARN and check the GPUs for memory or link errors "
                    "(`nvidia-smi -q -d ECC,ROW_REMAPPER`, `dmesg | grep -i xid`, NIC error "
                    "counters); pin the NCCL version and retry with NCCL_PROTO=Simple to isolate "
                    "a protocol bug."
                ),
            )
        )
    return out


# --- busbw against the link ------------------------------------------------------------------


def _largest(ms: list[Measurement]) -> dict[tuple[Any, ...], Measurement]:
    """Per (op, group, dtype), the back-to-back busbw at the largest size measured."""
    out: dict[tuple[Any, ...], Measurement] = {}
    for m in ms:
        if m.params.get("mode") != "back_to_back":
            continue
        key = (m.params.get("op"), m.params.get("group"), m.params.get("dtype"))
        held = out.get(key)
        if held is None or _size(m) > _size(held):
            out[key] = m
    return out


def _size(m: Measurement) -> int:
    size = m.params.get("size_bytes")
    return size if isinstance(size, int) else 0


def inter_node_peak_gbps(host: HostInfo) -> float | None:
    """A GPU's share of its node's NICs, GB/s one way: sum(rate Gb/s) / 8 / GPUs (None if no
    NIC rate or no GPU is known)."""
    rates = [
        n.rate_gbps
        for n in host.nics
        if n.kind in _NIC_KINDS and n.rate_gbps and (n.state or "up").lower() not in _DOWN_STATES
    ]
    if not rates or not host.gpus:
        return None
    return sum(rates) / 8 / len(host.gpus)  # Gb/s -> GB/s


def _group_hosts(m: Measurement, results: Results) -> list[HostInfo]:
    named = m.params.get("hosts")
    names = set(str(named).split(",")) if named else {h.hostname for h in results.hosts}
    if m.params.get("group_kind") == "intra_node" and not named:
        names = {m.host}
    return [h for h in results.hosts if h.hostname in names]


def _link_peak(m: Measurement, results: Results) -> tuple[float, str] | None:
    """The one-way link peak the group's busbw is compared with, and what it is."""
    kind = m.params.get("group_kind")
    hosts = _group_hosts(m, results)
    one_node = kind == "intra_node" or (kind == "world" and results.run.num_nodes == 1)
    if one_node:
        specs = [g.spec.nvlink_gbps_per_dir for h in hosts for g in h.gpus if g.spec]
        known = [s for s in specs if s]
        return (min(known), "NVLink spec per direction") if known else None
    peaks = [p for p in map(inter_node_peak_gbps, hosts) if p is not None]
    return (min(peaks), "NIC rate per GPU") if peaks else None


def low_busbw_findings(results: Results, *, min_efficiency: float) -> list[Finding]:
    """busbw at the largest size below ``min_efficiency`` x the link's one-way peak -> warn.

    Skipped on CPU (gloo) runs, and where the peak is unknown (no NVLink spec, no NIC rate)."""
    if results.run.backend != "nccl":
        return []
    out = []
    for m in _largest(select(results, benchmark=_BENCH, metric="busbw")).values():
        peak = _link_peak(m, results)
        if peak is None or m.value >= min_efficiency * peak[0]:
            continue
        out.append(_low_busbw_finding(m, peak=peak[0], what=peak[1], min_efficiency=min_efficiency))
    return out


def _low_busbw_finding(m: Measurement, *, peak: float, what: str, min_efficiency: float) -> Finding:
    op, group, size = m.params.get("op"), m.params.get("group"), _size(m)
    intra = what.startswith("NVLink")
    fix = (
        "Check NVLink health (`nvidia-smi nvlink --status`, `nvidia-smi topo -m`), that NCCL uses "
        "P2P/NVLink (NCCL_DEBUG=INFO, no NCCL_P2P_DISABLE), and on NVSwitch systems the fabric "
        "manager; compare with nccl-tests' all_reduce_perf."
        if intra
        else "Check that NCCL uses the RDMA NICs (NCCL_DEBUG=INFO shows NET/IB, not NET/Socket), "
        "GPUDirect RDMA (nvidia-peermem loaded), NCCL_IB_HCA / NCCL_SOCKET_IFNAME, and the "
        "NICs' link rate (`ibstat`); run `clusterbench run --only network`."
    )
    return Finding(
        id="collectives.low_busbw",
        severity="warn",
        scope=f"group:{group}",
        message=(
            f"{op} on group {group} reaches {m.value:.1f} GB/s busbw at {size} B, "
            f"{m.value / peak:.0%} of the {peak:.1f} GB/s {what} (threshold {min_efficiency:.0%})."
        ),
        evidence={
            "op": op,
            "group": group,
            "size_bytes": size,
            "busbw_gbps": m.value,
            "peak_gbps": peak,
            "peak_kind": what,
            "efficiency": round(m.value / peak, 4),
            "threshold": min_efficiency,
        },
        fix=fix,
    )


# --- node pairs -------------------------------------------------------------------------------


def node_pair_findings(results: Results, *, mads: float, min_rel: float) -> list[Finding]:
    """Per op, node pairs whose busbw falls behind the others -> fail, naming the common node.

    A bad node sits in k-1 of the k(k-1)/2 pairs, half or more of them with k <= 4 nodes, so
    the pairs' own median can be slow.  Each node is therefore scored by the median busbw of
    its pairs; a node whose score is an outlier (``mads`` scaled MADs and ``min_rel`` below the
    median score) is the common node, and the slow pairs are those ``min_rel`` below the median
    of the pairs without a bad node (or, with no bad node, outliers among the pairs).
    """
    pairs = [
        m
        for m in select(results, benchmark=_BENCH, metric="busbw")
        if m.params.get("group_kind") == "node_pairs" and m.params.get("hosts")
    ]
    by_op: dict[tuple[Any, Any], list[Measurement]] = defaultdict(list)
    for m in _largest(pairs).values():
        by_op[(m.params.get("op"), m.params.get("dtype"))].append(m)
    out = []
    for (op, _), ms in by_op.items():
        finding = _pair_finding(str(op), ms, mads=mads, min_rel=min_rel)
        if finding is not None:
            out.append(finding)
    return out


def _hosts_of(m: Measurement) -> tuple[str, ...]:
    return tuple(str(m.params.get("hosts", "")).split(","))


def _outliers_below(values: dict[str, float], *, mads: float, min_rel: float) -> list[str]:
    if len(values) < 3:
        return []
    keys = list(values)
    median = statistics.median(values.values())
    zs = robust_zscores([values[k] for k in keys])
    return [
        k
        for k, z in zip(keys, zs, strict=True)
        if z < -mads and median > 0 and (median - values[k]) / median >= min_rel
    ]


def _pair_finding(op: str, ms: list[Measurement], *, mads: float, min_rel: float) -> Finding | None:
    pair_value = {",".join(_hosts_of(m)): m.value for m in ms}
    per_node: dict[str, list[float]] = defaultdict(list)
    for m in ms:
        for host in _hosts_of(m):
            per_node[host].append(m.value)
    node_score = {h: statistics.median(v) for h, v in per_node.items()}
    bad_nodes = _outliers_below(node_score, mads=mads, min_rel=min_rel)
    if bad_nodes:
        healthy = [v for p, v in pair_value.items() if not set(p.split(",")) & set(bad_nodes)]
        base = statistics.median(healthy) if healthy else max(pair_value.values())
        slow = [p for p, v in pair_value.items() if base > 0 and (base - v) / base >= min_rel]
    else:
        slow = _outliers_below(pair_value, mads=mads, min_rel=min_rel)
        base = statistics.median(pair_value.values()) if pair_value else 0.0
    if not slow:
        return None
    common = bad_nodes or _most_common_node(slow)
    return _node_pair_finding(op, slow=slow, common=common, base=base, pair_value=pair_value)


def _most_common_node(slow_pairs: list[str]) -> list[str]:
    counts = Counter(h for p in slow_pairs for h in p.split(","))
    top = max(counts.values())
    return sorted(h for h, c in counts.items() if c == top and c > 1)


def _node_pair_finding(
    op: str, *, slow: list[str], common: list[str], base: float, pair_value: dict[str, float]
) -> Finding:
    shown = ", ".join(f"{p.replace(',', '-')} {pair_value[p]:.1f} GB/s" for p in slow)
    where = f"; common node: {', '.join(common)}" if common else ""
    return Finding(
        id="collectives.slow_node_pair",
        severity="fail",
        scope=f"host:{common[0]}" if len(common) == 1 else "run",
        message=(
            f"{op} busbw between node pairs: {shown}, below the {base:.1f} GB/s of the healthy "
            f"pairs{where}."
        ),
        evidence={
            "op": op,
            "slow_pairs": {p.replace(",", "-"): pair_value[p] for p in slow},
            "healthy_median_gbps": base,
            "common_nodes": common,
            "num_pairs": len(pair_value),
        },
        fix=(
            "Check the named node's NICs and cables: `ibstat` (rate, state), port error "
            "counters (`perfquery -x`), `ethtool -S`; compare its switch ports with the "
            "others; drain it if the pairs stay slow."
        ),
    )
