"""Verdicts on ``transfer``: the PCIe link under load (and idle probe readings of GPUs not
read under load), host<->device bandwidth and NUMA placement, GPU<->GPU copies.

Pure functions: a :class:`~clusterbench.schema.Results` in, a list of findings out.
"""

from __future__ import annotations

from collections import defaultdict

from clusterbench.benchmarks.transfer import TransferMetrics
from clusterbench.benchmarks.transfer.thresholds import TransferThresholds
from clusterbench.judging.measurements import (
    as_number,
    best_by,
    dev_label,
    per_device,
    ref_value,
    scope_label,
)
from clusterbench.metrics import Metric
from clusterbench.schema import Finding, Measurement, PCIeLink, Results
from clusterbench.thresholds import Thresholds

__all__ = [
    "findings",
    "host_device_findings",
    "p2p_findings",
    "pcie_findings",
]

_PCIE_FIX = (
    "Reseat the GPU and its riser or cable, set the slot's link speed to Auto (or its maximum "
    "generation) in the BIOS, replace the riser if it persists; verify under load with "
    "`nvidia-smi -q -d PCIE`."
)


def findings(results: Results, thresholds: Thresholds) -> list[Finding]:
    """Every verdict on the transfer measurements: PCIe link, host<->device, GPU<->GPU."""
    limits = thresholds.of(TransferThresholds)
    return [
        *pcie_findings(results),
        *host_device_findings(
            results,
            min_efficiency=limits.host_device_min_efficiency,
            remote_numa_max_loss=limits.remote_numa_max_loss,
        ),
        *p2p_findings(results, min_efficiency=limits.p2p_min_efficiency),
    ]


# --- PCIe link -----------------------------------------------------------------------------


def pcie_findings(results: Results) -> list[Finding]:
    """PCIe gen/width under load below the maximum -> fail; idle-only low readings -> info."""
    out = []
    under_load: set[tuple[str, str]] = set()
    readings: tuple[tuple[Metric, str, str], ...] = (
        (TransferMetrics.pcie_link_gen, "max_gen", "gen"),
        (TransferMetrics.pcie_link_width, "max_width", "x"),
    )
    for metric, max_key, label in readings:
        for m in metric.select(results):
            under_load.add(per_device(m))
            maximum = as_number(m.params.get(max_key))
            if maximum is not None and m.value < maximum:
                out.append(_pcie_loaded_finding(m, label=label, maximum=maximum))
    return out + _pcie_idle_findings(results, skip=under_load)


def _pcie_loaded_finding(m: Measurement, *, label: str, maximum: float) -> Finding:
    what = "gen" if label == "gen" else "width"
    return Finding(
        id=f"pcie.low_{what}",
        severity="fail",
        scope=scope_label(m.host, m.device),
        message=(
            f"PCIe link runs at {_link(label, m.value)} under load, below its maximum "
            f"{_link(label, maximum)}: host<->device bandwidth is cut accordingly."
        ),
        evidence={what: m.value, f"max_{what}": maximum},
        fix=_PCIE_FIX,
    )


def _link(label: str, value: float) -> str:
    return f"gen {value:g}" if label == "gen" else f"x{value:g}"


def _pcie_idle_findings(results: Results, *, skip: set[tuple[str, str]]) -> list[Finding]:
    """Probe readings of GPUs with no reading under load: a low idle gen is normal."""
    out = []
    for host in results.hosts:
        for gpu in host.gpus:
            device = f"cuda:{gpu.index}"
            if (host.hostname, device) in skip:
                continue
            finding = _pcie_idle_finding(gpu.pcie, scope=scope_label(host.hostname, device))
            if finding:
                out.append(finding)
    return out


def _pcie_idle_finding(link: PCIeLink, *, scope: str) -> Finding | None:
    if not link.below_max():
        return None
    message = (
        f"PCIe link reads gen {link.gen} x{link.width} at idle (maximum gen {link.max_gen} "
        f"x{link.max_width}); GPUs lower the link speed when idle to save power, so only a "
        "reading under load is a fault"
    )
    if link.width and link.max_width and link.width < link.max_width:
        message += " (a narrower link is unusual even at idle)"
    return Finding(
        id="pcie.idle_reading",
        severity="info",
        scope=scope,
        message=message + ".",
        evidence=link.model_dump(),
        fix=(
            "Check under load: `clusterbench run --only transfer`, or `nvidia-smi -q -d PCIE` "
            "while the GPU is busy."
        ),
    )


# --- host <-> device -----------------------------------------------------------------------


def host_device_findings(
    results: Results, *, min_efficiency: float, remote_numa_max_loss: float
) -> list[Finding]:
    """Pinned h2d/d2h below ``min_efficiency`` x the link rate -> warn; remote NUMA -> info."""
    pinned = [
        m for m in TransferMetrics.bandwidth.select(results) if m.params.get("memory") == "pinned"
    ]
    best = best_by(
        pinned, lambda m: (m.host, m.device, m.params.get("direction"), m.params.get("numa"))
    )
    by_direction: dict[tuple[str, str, object], dict[object, Measurement]] = defaultdict(dict)
    for (host, device, direction, numa), m in best.items():
        by_direction[(host, device, direction)][numa] = m
    out = []
    for by_numa in by_direction.values():
        # Judge the link from the GPU's own NUMA node when that was measured.
        near = by_numa.get("local") or by_numa.get("unknown") or next(iter(by_numa.values()))
        finding = _link_rate_finding(near, min_efficiency=min_efficiency)
        if finding:
            out.append(finding)
        remote = by_numa.get("remote")
        if remote is not None and remote is not near:
            out.extend(_remote_numa_finding(near, remote, max_loss=remote_numa_max_loss))
    return out


def _numa_fix(m: Measurement) -> str:
    node = m.params.get("numa_node")
    n = node if node is not None else "N"
    return (
        f"Bind each rank to its GPU's NUMA node (`numactl --cpunodebind={n} --membind={n}`, "
        "node from `nvidia-smi topo -m`), keep host buffers pinned (`pin_memory=True`), and "
        "check the link with `nvidia-smi -q -d PCIE`."
    )


def _link_rate_finding(m: Measurement, *, min_efficiency: float) -> Finding | None:
    rate = ref_value(m, "link_rate")
    if rate is None or m.value >= min_efficiency * rate:
        return None
    direction, numa = m.params.get("direction"), m.params.get("numa")
    return Finding(
        id="transfer.low_bandwidth",
        severity="warn",
        scope=scope_label(m.host, m.device),
        message=(
            f"Pinned {direction} reaches {m.value:.1f} GB/s, {m.value / rate:.0%} of the "
            f"{rate:.1f} GB/s PCIe link rate (threshold {min_efficiency:.0%}, NUMA {numa})."
        ),
        evidence={
            "direction": direction,
            "bandwidth_gbps": m.value,
            "link_rate_gbps": rate,
            "efficiency": round(m.value / rate, 4),
            "threshold": min_efficiency,
            "numa": numa,
            "numa_node": m.params.get("numa_node"),
        },
        fix=_numa_fix(m),
    )


def _remote_numa_finding(
    local: Measurement, remote: Measurement, *, max_loss: float
) -> list[Finding]:
    if local.value <= 0 or remote.value >= (1 - max_loss) * local.value:
        return []
    loss = 1 - remote.value / local.value
    direction = local.params.get("direction")
    return [
        Finding(
            id="transfer.remote_numa",
            severity="info",
            scope=scope_label(local.host, local.device),
            message=(
                f"Pinned {direction} from the remote NUMA node reaches {remote.value:.1f} GB/s, "
                f"{loss:.0%} below the local node's {local.value:.1f} GB/s."
            ),
            evidence={
                "direction": direction,
                "local_gbps": local.value,
                "remote_gbps": remote.value,
                "loss": round(loss, 4),
            },
            fix=_numa_fix(local),
        )
    ]


# --- GPU <-> GPU ---------------------------------------------------------------------------


def p2p_findings(results: Results, *, min_efficiency: float) -> list[Finding]:
    """No peer access between two GPUs -> warn; a pair below ``min_efficiency`` x NVLink -> warn."""
    pairs = TransferMetrics.p2p_bandwidth.select(results)
    best = best_by(pairs, _pair_key)
    out: list[Finding] = []
    seen_no_access: set[tuple[str, frozenset[str]]] = set()
    for (host, src, dst, _), m in best.items():
        if m.params.get("p2p_access") is False:
            if (host, frozenset((src, dst))) not in seen_no_access:
                seen_no_access.add((host, frozenset((src, dst))))
                out.append(_no_peer_access_finding(m, src=src, dst=dst))
            continue
        finding = _p2p_bandwidth_finding(m, pair=(src, dst), min_efficiency=min_efficiency)
        if finding:
            out.append(finding)
    return out


def _p2p_bandwidth_finding(
    m: Measurement, *, pair: tuple[str, str], min_efficiency: float
) -> Finding | None:
    peak = ref_value(m)
    if peak is None or m.value >= min_efficiency * peak:
        return None
    (src, dst), mode = pair, _mode(m)
    arrow = "<->" if mode == "bidir" else "->"
    return Finding(
        id="p2p.low_bandwidth",
        severity="warn",
        scope=scope_label(m.host, f"{src}-{dst}"),
        message=(
            f"{src}{arrow}{dst} ({mode}) reaches {m.value:.1f} GB/s, {m.value / peak:.0%} of "
            f"the {peak:.1f} GB/s NVLink spec (threshold {min_efficiency:.0%})."
        ),
        evidence={
            "src": src,
            "dst": dst,
            "mode": mode,
            "bandwidth_gbps": m.value,
            "spec_gbps": peak,
            "efficiency": round(m.value / peak, 4),
            "threshold": min_efficiency,
        },
        fix=(
            "Check the NVLinks of this pair: `nvidia-smi nvlink --status` (every link up at "
            "full rate), `nvidia-smi nvlink -e` (error counters); on NVSwitch systems "
            "`systemctl status nvidia-fabricmanager`."
        ),
    )


def _pair_key(m: Measurement) -> tuple[str, str, str, str]:
    return (m.host, dev_label(m.params.get("src")), dev_label(m.params.get("dst")), _mode(m))


def _mode(m: Measurement) -> str:
    return str(m.params.get("mode", "oneway"))


def _no_peer_access_finding(m: Measurement, *, src: str, dst: str) -> Finding:
    return Finding(
        id="p2p.no_peer_access",
        severity="warn",
        scope=scope_label(m.host, f"{src}-{dst}"),
        message=(
            f"No peer access between {src} and {dst}: copies go through host memory "
            f"({m.value:.1f} GB/s {_mode(m)})."
        ),
        evidence={"src": src, "dst": dst, "p2p_access": False, "bandwidth_gbps": m.value},
        fix=(
            "Check `nvidia-smi topo -p2p r` and `nvidia-smi topo -m`; on PCIe systems disable "
            "ACS on the PCIe switches or boot with `iommu=pt`; in VMs pass the GPUs through "
            "with peer-to-peer enabled."
        ),
    )
