"""Level-2 verdicts on the host network: NIC states, TCP and RDMA bandwidth against the link
rate, the slow node among node pairs, and whether a node's inter-node bandwidth suits the model
size.

Pure functions: a :class:`~clusterbench.schema.Results` in, a list of findings out.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from clusterbench.benchmarks.network import NetworkMetrics
from clusterbench.benchmarks.network.bandwidth_ratio import bandwidth_ratio_findings
from clusterbench.benchmarks.network.thresholds import NetworkThresholds
from clusterbench.hardware.sysfs import RDMA_KINDS
from clusterbench.judging.measurements import best_by, ref_value, scope_label
from clusterbench.judging.node_pairs import slow_pair_finding
from clusterbench.judging.pair_series import directed_pairs
from clusterbench.judging.peers import SPREAD_SIGMAS
from clusterbench.schema import Finding, Measurement, Results
from clusterbench.thresholds import Thresholds

__all__ = [
    "LARGE_MODEL_PARAMS_B",
    "findings",
    "internode_capacity_findings",
    "nic_state_findings",
    "rdma_bandwidth_findings",
    "slow_node_pair_findings",
    "tcp_throughput_findings",
]

LARGE_MODEL_PARAMS_B = 7.0
"""Models above this many billion parameters need a fast inter-node network (seed)."""

_NIC_FIX = (
    "Check the cable and the switch port; RDMA: `ibv_devinfo -d DEVICE` (state PORT_ACTIVE, "
    "phys_state LINK_UP), and for InfiniBand a running subnet manager (`sminfo`); Ethernet: "
    "`ip link show IFACE`, `ethtool IFACE`."
)
_TCP_FIX = (
    "Look for congestion, buffer sizes, MTU or flow control: the same MTU end to end "
    "(`ip link show`, jumbo frames 9000 on the switch too), larger socket buffers (`sysctl -w "
    "net.core.rmem_max=... net.core.wmem_max=...`, `net.ipv4.tcp_rmem/tcp_wmem`), drops and "
    "pause frames in `ethtool -S IFACE`; retry with more streams (`--set network.streams=8`)."
)
_RDMA_FIX = (
    "Check `ibv_devinfo` (link width and speed), PCIe of the HCA (`lspci -vv`: LnkSta equal "
    "to LnkCap), RoCE PFC/ECN on the switches, and that both ends use the NIC near the GPU."
)
_PAIR_FIX = (
    "Check the named node's NIC, cable and switch port: link state and rate (`ethtool IFACE`, "
    "`ibstat`), errors and drops (`ip -s link show IFACE`, `ethtool -S IFACE`), the same MTU "
    "end to end (`ip link show`), no traffic shaping left behind (`tc qdisc show`); compare "
    "its switch port's counters with the others' and drain the node if its pairs stay slow."
)
_CAPACITY_FIX = (
    "Give each node at least 400 Gb/s (preferably 800) to the other nodes: InfiniBand NDR, "
    "RoCE v2 or EFA, ideally one NIC per GPU, and check that NCCL uses them (`NCCL_DEBUG=INFO` "
    "shows NET/IB); on slower links use gradient compression or pipeline parallelism."
)


def findings(results: Results, thresholds: Thresholds) -> list[Finding]:
    """Every network verdict; the large-model check only when ``thresholds.model_params_b``."""
    limits = thresholds.of(NetworkThresholds)
    min_efficiency = limits.network_min_efficiency
    return [
        *nic_state_findings(results),
        *tcp_throughput_findings(results, min_efficiency=min_efficiency),
        *rdma_bandwidth_findings(results, min_efficiency=min_efficiency),
        *slow_node_pair_findings(
            results,
            mads=thresholds.outlier_mads,
            min_rel=thresholds.node_pair_min_rel,
            sigmas=thresholds.outlier_spread_sigmas,
        ),
        *internode_capacity_findings(
            results,
            model_params_b=limits.model_params_b or 0.0,
            min_gbps=limits.min_internode_gbps_large_model,
        ),
        *bandwidth_ratio_findings(results),
    ]


def _nics(results: Results) -> dict[tuple[str, str], Measurement]:
    """The latest nic_rate reading per (host, nic)."""
    return {(m.host, str(m.params.get("nic"))): m for m in NetworkMetrics.nic_rate.select(results)}


def _is_up(m: Measurement) -> bool:
    return str(m.params.get("state") or "").upper() in ("ACTIVE", "UP")


def _is_rdma(m: Measurement) -> bool:
    return m.params.get("kind") in RDMA_KINDS


def nic_state_findings(results: Results) -> list[Finding]:
    """An RDMA port not ACTIVE -> warn; an Ethernet port down -> info (often just unused)."""
    out = []
    for (host, nic), m in _nics(results).items():
        if _is_up(m):
            continue
        rdma = _is_rdma(m)
        state = m.params.get("state")
        what, want = ("RDMA port", "ACTIVE") if rdma else ("Network interface", "up")
        note = "" if rdma else " (fine if it is not cabled on purpose)"
        out.append(
            Finding(
                id="network.nic_down",
                severity="warn" if rdma else "info",
                scope=scope_label(host, nic),
                message=f"{what} {nic} is {state or 'in an unknown state'}, not {want}{note}.",
                evidence={"nic": nic, "kind": m.params.get("kind"), "state": state},
                fix=_NIC_FIX,
            )
        )
    return out


def tcp_throughput_findings(results: Results, *, min_efficiency: float) -> list[Finding]:
    """Best TCP throughput of a node pair below ``min_efficiency`` x the slower link -> warn."""
    pairs = [
        m for m in NetworkMetrics.tcp_throughput.select(results) if not m.params.get("loopback")
    ]
    out = []
    best = best_by(pairs, lambda m: (m.params.get("src_host"), m.params.get("dst_host")))
    for (src, dst), m in best.items():
        rate = ref_value(m, "link_rate")
        if rate is None or m.value >= min_efficiency * rate:
            continue
        # the built-in socket test moves data from one Python process per side, which on fast
        # links may bound it before the link does: its finding says so and points at iperf3
        by_socket = m.params.get("tool") == "socket"
        out.append(
            Finding(
                id="network.low_tcp_throughput",
                severity="info" if by_socket else "warn",
                scope=scope_label(str(src), f"to:{dst}"),
                message=(
                    f"TCP {src}->{dst} reaches {m.value:.1f} Gb/s with {m.params.get('streams')} "
                    f"streams, {m.value / rate:.0%} of the {rate:g} Gb/s link "
                    f"(threshold {min_efficiency:.0%})."
                    + (
                        " Measured by the built-in socket test, which may be CPU-bound."
                        if by_socket
                        else ""
                    )
                ),
                evidence=_efficiency_evidence(m, rate=rate, threshold=min_efficiency),
                fix=("Install iperf3 on every node and rerun. " if by_socket else "") + _TCP_FIX,
            )
        )
    return out


def _efficiency_evidence(m: Measurement, *, rate: float, threshold: float) -> dict[str, Any]:
    return {
        "src_host": m.params.get("src_host"),
        "dst_host": m.params.get("dst_host"),
        "measured_gbps": round(m.value, 3),
        "link_rate_gbps": rate,
        "efficiency": round(m.value / rate, 4),
        "threshold": threshold,
        "tool": m.params.get("tool"),
    }


def rdma_bandwidth_findings(results: Results, *, min_efficiency: float) -> list[Finding]:
    """ib_write_bw below ``min_efficiency`` x the slower port's rate -> warn."""
    rates: dict[tuple[str, str], float] = {}
    for (host, nic), m in _nics(results).items():
        device = nic.split("/")[0]  # "mlx5_0/1" -> "mlx5_0", as ib_write_bw -d names it
        rates[(host, device)] = max(m.value, rates.get((host, device), 0.0))
    out = []
    for m in NetworkMetrics.rdma_write_bw.select(results):
        ends = [
            rates.get((str(m.params.get(h)), str(m.params.get(n))))
            for h, n in (("src_host", "nic"), ("dst_host", "peer_nic"))
        ]
        known = [r for r in ends if r]
        if len(known) < 2 or m.value >= min_efficiency * min(known):
            continue
        rate = min(known)
        out.append(
            Finding(
                id="network.low_rdma_bandwidth",
                severity="warn",
                scope=scope_label(m.host, f"{m.params.get('nic')}-{m.params.get('dst_host')}"),
                message=(
                    f"RDMA write {m.params.get('src_host')}->{m.params.get('dst_host')} reaches "
                    f"{m.value:.1f} Gb/s, {m.value / rate:.0%} of the {rate:g} Gb/s port rate "
                    f"(threshold {min_efficiency:.0%})."
                ),
                evidence=_efficiency_evidence(m, rate=rate, threshold=min_efficiency),
                fix=_RDMA_FIX,
            )
        )
    return out


def slow_node_pair_findings(
    results: Results, *, mads: float, min_rel: float, sigmas: float = SPREAD_SIGMAS
) -> list[Finding]:
    """Directed node pairs whose TCP throughput or RDMA write bandwidth falls behind the others
    -> fail, naming the common node (:func:`directed_pairs`)."""
    out = []
    for series in directed_pairs(results.measurements, mads=mads, min_rel=min_rel, sigmas=sigmas):
        if series.slow is None:
            continue
        measured = (
            f"TCP throughput ({series.tool})"
            if series.metric == NetworkMetrics.tcp_throughput
            else "RDMA write bandwidth (ib_write_bw)"
        )
        out.append(
            slow_pair_finding(
                series.slow,
                finding_id="network.slow_node_pair",
                measured=measured,
                unit="Gb/s",
                fix=_PAIR_FIX,
                directed=True,
                evidence={"metric": series.metric.name, "tool": series.tool or None},
            )
        )
    return out


def _capacity_per_host(results: Results) -> dict[str, tuple[float, str]]:
    """Per host: the sum of ACTIVE RDMA port rates, else the fastest Ethernet link that is up."""
    rdma: dict[str, float] = defaultdict(float)
    ethernet: dict[str, float] = defaultdict(float)
    for (host, _), m in _nics(results).items():
        if _is_up(m) and _is_rdma(m):
            rdma[host] += m.value
        elif _is_up(m):
            ethernet[host] = max(ethernet[host], m.value)
    hosts = set(rdma) | set(ethernet)
    return {
        h: (rdma[h], "sum of ACTIVE RDMA ports")
        if rdma.get(h)
        else (ethernet[h], "fastest Ethernet link")
        for h in hosts
    }


def internode_capacity_findings(
    results: Results, *, model_params_b: float, min_gbps: float
) -> list[Finding]:
    """For a model above 7B parameters, a node below ``min_gbps`` to the others -> warn."""
    if model_params_b <= LARGE_MODEL_PARAMS_B:
        return []
    out = []
    for host, (gbps, basis) in sorted(_capacity_per_host(results).items()):
        if gbps >= min_gbps:
            continue
        out.append(
            Finding(
                id="network.internode_too_slow",
                severity="warn",
                scope=scope_label(host),
                message=(
                    f"{host} has {gbps:g} Gb/s to other nodes ({basis}); a {model_params_b:g}B "
                    f"model needs at least {min_gbps:g} Gb/s per node, or inter-node "
                    "communication bounds training."
                ),
                evidence={
                    "internode_gbps": gbps,
                    "basis": basis,
                    "model_params_b": model_params_b,
                    "min_gbps": min_gbps,
                },
                fix=_CAPACITY_FIX,
            )
        )
    return out
