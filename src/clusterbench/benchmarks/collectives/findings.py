"""Verdicts on the collectives benchmark: wrong results, low busbw, a dip of busbw over a range
of sizes, the slow node in node pairs.

busbw is compared with the link the group crosses (nccl-tests, docs/reference.md): within one
node what healthy NVLink of the SKU reaches for the op (``GpuSpec.busbw_achievable``), else its
per-direction spec; across nodes each GPU's share of its node's NICs,
``sum(NIC Gb/s) / 8 / GPUs per node`` (the rails of a node share its NICs).
Only back-to-back timings are judged: against the link at the largest size measured (the busbw
plateau), and over the sizes for a dip.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.benchmarks.collectives import CollectivesMetrics
from clusterbench.benchmarks.collectives.thresholds import CollectivesThresholds
from clusterbench.benchmarks.collectives.tune_findings import tune_findings
from clusterbench.judging.node_pairs import slow_pair_finding
from clusterbench.judging.pair_series import (
    busbw_at_largest_size,
    busbw_by_size,
    node_pair_busbw,
    size_bytes,
)
from clusterbench.judging.peers import SPREAD_SIGMAS
from clusterbench.schema import Finding, HostInfo, Measurement, Results
from clusterbench.thresholds import Thresholds
from clusterbench.units import format_bytes

__all__ = [
    "busbw_dip_findings",
    "findings",
    "inter_node_peak_gbps",
    "low_busbw_findings",
    "node_pair_findings",
    "wrong_result_findings",
]

_NIC_KINDS = frozenset({"infiniband", "roce", "efa", "ethernet"})
_DOWN_STATES = frozenset({"down", "disabled", "polling", "init", "armed", "dormant"})


def findings(results: Results, thresholds: Thresholds) -> list[Finding]:
    """Every collectives finding: wrong results (fail), low busbw (warn), slow node pair (fail),
    and the NCCL tuning sweep's (:mod:`.nccl_tune_findings`)."""
    limits = thresholds.of(CollectivesThresholds)
    return [
        *wrong_result_findings(results),
        *low_busbw_findings(results, min_efficiency=limits.busbw_min_efficiency),
        *busbw_dip_findings(
            results, ratio=limits.busbw_dip_ratio, min_sizes=limits.busbw_dip_sizes
        ),
        *node_pair_findings(
            results,
            mads=thresholds.outlier_mads,
            min_rel=thresholds.node_pair_min_rel,
            sigmas=thresholds.outlier_spread_sigmas,
        ),
        *tune_findings(results),
    ]


def wrong_result_findings(results: Results) -> list[Finding]:
    """Any wrong output element (nccl-tests #wrong > 0) -> fail, per op and group."""
    out = []
    for m in CollectivesMetrics.num_wrong.select(results):
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


@dataclass(frozen=True, slots=True)
class _LinkPeak:
    gbps: float
    what: str
    """What the peak is, for the message."""
    nvlink: bool
    """Within one node (NVLink), else across nodes (the NICs)."""


def _link_peak(m: Measurement, results: Results) -> _LinkPeak | None:
    """The one-way link peak the group's busbw is compared with, and what it is."""
    kind = m.params.get("group_kind")
    hosts = _group_hosts(m, results)
    one_node = kind == "intra_node" or (kind == "world" and results.run.num_nodes == 1)
    if one_node:
        return _nvlink_reference(str(m.params.get("op")), hosts)
    peaks = [p for p in map(inter_node_peak_gbps, hosts) if p is not None]
    return _LinkPeak(min(peaks), "NIC rate per GPU", nvlink=False) if peaks else None


def _nvlink_reference(op: str, hosts: list[HostInfo]) -> _LinkPeak | None:
    """What healthy NVLink of this SKU reaches for ``op`` when known, else the raw spec.

    No collective reaches the raw NVLink rate (2x H200: all_reduce 342 of 450 GB/s), so
    judging against the spec would flag healthy nodes; the spec is the fallback only."""
    specs = [g.spec for h in hosts for g in h.gpus if g.spec]
    achievable = [s.busbw_achievable.get(op) for s in specs]
    if specs and all(achievable):
        best = min(a for a in achievable if a)
        return _LinkPeak(best, f"busbw healthy {specs[0].sku} NVLink reaches", nvlink=True)
    known = [s.nvlink_gbps_per_dir for s in specs if s.nvlink_gbps_per_dir]
    return _LinkPeak(min(known), "NVLink spec per direction", nvlink=True) if known else None


# Below this size busbw still climbs with size on fast links: too small to judge the link.
MIN_JUDGED_BYTES = 64 * 2**20


def low_busbw_findings(results: Results, *, min_efficiency: float) -> list[Finding]:
    """busbw at the largest size below ``min_efficiency`` x the link's peak -> warn.

    Skipped on CPU (gloo) runs, and where the peak is unknown (no NVLink spec, no NIC rate)."""
    if results.run.backend != "nccl":
        return []
    out = []
    for m in busbw_at_largest_size(CollectivesMetrics.busbw.select(results)).values():
        peak = _link_peak(m, results)
        if (
            peak is None
            or size_bytes(m) < MIN_JUDGED_BYTES
            or m.value >= min_efficiency * peak.gbps
        ):
            continue
        out.append(_low_busbw_finding(m, link=peak, min_efficiency=min_efficiency))
    return out


def _low_busbw_finding(m: Measurement, *, link: _LinkPeak, min_efficiency: float) -> Finding:
    op, group, size = m.params.get("op"), m.params.get("group"), size_bytes(m)
    peak, what = link.gbps, link.what
    fix = (
        "Check NVLink health (`nvidia-smi nvlink --status`, `nvidia-smi topo -m`), that NCCL uses "
        "P2P/NVLink (NCCL_DEBUG=INFO, no NCCL_P2P_DISABLE), and on NVSwitch systems the fabric "
        "manager; compare with nccl-tests' all_reduce_perf."
        if link.nvlink
        else "Check that NCCL uses the RDMA NICs (NCCL_DEBUG=INFO shows NET/IB, not NET/Socket), "
        "GPUDirect RDMA (nvidia-peermem loaded), NCCL_IB_HCA / NCCL_SOCKET_IFNAME, and the "
        "NICs' link rate (`ibstat`); run `clusterbench run --only network`."
    )
    return Finding(
        id="collectives.low_busbw",
        severity="warn",
        scope=f"group:{group}",
        message=(
            f"{op} on group {group} reaches {m.value:.1f} GB/s busbw at {format_bytes(size)}, "
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


# --- a dip over a range of sizes -------------------------------------------------------------

# Below this size busbw is latency-bound: too small to call a fall a dip.
DIP_MIN_BYTES = 2**20


@dataclass(frozen=True, slots=True)
class _Dip:
    best: Measurement
    """The best busbw at a size below the dip."""
    sizes: list[Measurement]
    """The successive sizes below ``ratio`` x the best."""
    back: Measurement | None
    """The first larger size at or above ``ratio`` x the best again; None: the dip lasts to the
    largest size measured."""

    @property
    def lowest(self) -> Measurement:
        return min(self.sizes, key=lambda m: m.value)


def _deepest_dip(series: list[Measurement], *, ratio: float, min_sizes: int) -> _Dip | None:
    """The deepest run of ``min_sizes`` or more successive sizes from :data:`DIP_MIN_BYTES` whose
    busbw stays below ``ratio`` x the best busbw at a smaller size."""
    dips: list[_Dip] = []
    best: Measurement | None = None
    i = 0
    while i < len(series):
        m = series[i]
        if best is not None and size_bytes(m) >= DIP_MIN_BYTES and m.value < ratio * best.value:
            j = i
            while j < len(series) and series[j].value < ratio * best.value:
                j += 1
            if j - i >= min_sizes:
                back = series[j] if j < len(series) else None
                dips.append(_Dip(best=best, sizes=series[i:j], back=back))
            i = j
            continue
        if best is None or m.value > best.value:
            best = m
        i += 1
    return min(dips, key=lambda d: d.lowest.value / d.best.value, default=None)


def busbw_dip_findings(results: Results, *, ratio: float, min_sizes: int) -> list[Finding]:
    """busbw that falls below ``ratio`` x the best at a smaller size, over ``min_sizes`` or
    more successive sizes from 1 MiB -> warn, per op, group and dtype (the deepest dip).

    On a healthy link busbw grows with size to its plateau; a fall over a range of sizes comes
    from a choice NCCL makes by size (algorithm, protocol, channels, buffer) or from the
    fabric under that load.  Back-to-back timings only; skipped on CPU (gloo) runs."""
    if results.run.backend != "nccl":
        return []
    out = []
    for series in busbw_by_size(CollectivesMetrics.busbw.select(results)).values():
        dip = _deepest_dip(series, ratio=ratio, min_sizes=min_sizes)
        if dip is not None:
            out.append(_dip_finding(dip, ratio=ratio))
    return out


def _dip_finding(dip: _Dip, *, ratio: float) -> Finding:
    best, low, first, last = dip.best, dip.lowest, dip.sizes[0], dip.sizes[-1]
    op, group = best.params.get("op"), best.params.get("group")
    span = (
        f"at {format_bytes(size_bytes(first))}"
        if first is last
        else f"from {format_bytes(size_bytes(first))} to {format_bytes(size_bytes(last))}"
    )
    after = (
        f"; it is back to {dip.back.value:.1f} GB/s at {format_bytes(size_bytes(dip.back))}"
        if dip.back is not None
        else ", up to the largest size measured"
    )
    return Finding(
        id="collectives.busbw_dip",
        severity="warn",
        scope=f"group:{group}",
        message=(
            f"{op} busbw on group {group} falls from {best.value:.1f} GB/s at "
            f"{format_bytes(size_bytes(best))} to {low.value:.2f} GB/s at "
            f"{format_bytes(size_bytes(low))}: below {ratio:.0%} of it at {len(dip.sizes)} "
            f"successive sizes, {span}{after}."
        ),
        evidence={
            "op": op,
            "group": group,
            "dtype": best.params.get("dtype"),
            "best_gbps": best.value,
            "best_size_bytes": size_bytes(best),
            "lowest_gbps": low.value,
            "lowest_size_bytes": size_bytes(low),
            "dip_sizes_bytes": [size_bytes(m) for m in dip.sizes],
            "dip_busbw_gbps": [m.value for m in dip.sizes],
            "back_at_bytes": size_bytes(dip.back) if dip.back is not None else None,
            "ratio": ratio,
        },
        fix=(
            "Rerun the sizes of the dip with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING to see the "
            "algorithm and protocol NCCL picks at each; check what the job sets by size "
            "(NCCL_BUFFSIZE, NCCL_*_CHUNKSIZE, NCCL_ALGO, NCCL_PROTO, NCCL_MIN/MAX_NCHANNELS) and "
            "try the sizes with the NCCL tuning sweep (`--set collectives.tune=true`); across "
            "nodes, rerun to see whether the dip moves, and look at the switch ports' congestion "
            "and error counters."
        ),
    )


# --- node pairs -------------------------------------------------------------------------------

_PAIR_FIX = (
    "Check the named node's NICs and cables: `ibstat` (rate, state), port error "
    "counters (`perfquery -x`), `ethtool -S`; compare its switch ports with the "
    "others; drain it if the pairs stay slow."
)


def node_pair_findings(
    results: Results, *, mads: float, min_rel: float, sigmas: float = SPREAD_SIGMAS
) -> list[Finding]:
    """Per op, node pairs whose busbw falls behind the others -> fail, naming the common node
    (:func:`node_pair_busbw`)."""
    return [
        slow_pair_finding(
            series.slow,
            finding_id="collectives.slow_node_pair",
            measured=f"{series.op} busbw",
            unit="GB/s",
            fix=_PAIR_FIX,
            directed=False,
            evidence={"op": series.op},
        )
        for series in node_pair_busbw(
            results.measurements, mads=mads, min_rel=min_rel, sigmas=sigmas
        )
        if series.slow is not None
    ]
