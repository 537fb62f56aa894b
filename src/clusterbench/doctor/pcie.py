"""PCIe: links below their maximum, ACS on bridges above GPUs and NICs, GPU-NIC distance."""

from __future__ import annotations

import re
from pathlib import Path

from clusterbench.doctor._sources import Check, Sources
from clusterbench.hardware.sysfs import PCI_ADDRESS, RDMA_KINDS, pci_device_dir
from clusterbench.hardware.topology import normalize_pci_bus_id
from clusterbench.schema import Finding, GpuInfo, NicInfo

__all__ = [
    "CHECKS",
    "check_acs",
    "check_gpu_nic_distance",
    "check_pcie_link",
    "nearest_nic",
    "parse_acs_enabled",
    "upstream_bridges",
]

_LSPCI_HEADER = re.compile(r"^((?:[0-9a-fA-F]{4,}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(.*)$")


# ---------------------------------------------------------------------------- link speed


def _slot_limited(src: Sources, gpu: GpuInfo) -> Finding | None:
    link, spec = gpu.pcie, gpu.spec
    if spec is None:
        return None
    low_gen = bool(link.max_gen and spec.pcie_gen and link.max_gen < spec.pcie_gen)
    low_width = bool(link.max_width and spec.pcie_width and link.max_width < spec.pcie_width)
    if not (low_gen or low_width):
        return None
    return Finding(
        id="doctor.pcie.slot_limited",
        severity="warn",
        scope=src.gpu_scope(gpu.index),
        message=f"the link's maximum (Gen{link.max_gen} x{link.max_width}) is below the "
        f"{spec.sku}'s Gen{spec.pcie_gen} x{spec.pcie_width}: the slot, riser or BIOS limits it",
        evidence=link.model_dump() | {"spec_gen": spec.pcie_gen, "spec_width": spec.pcie_width},
        fix="check the slot/riser and the BIOS PCIe speed setting; reseat the GPU",
    )


def _below_max(src: Sources, gpu: GpuInfo) -> Finding | None:
    link = gpu.pcie
    if not link.below_max():
        return None
    return Finding(
        id="doctor.pcie.link_below_max",
        severity="info",
        scope=src.gpu_scope(gpu.index),
        message=f"PCIe link Gen{link.gen} x{link.width} below its maximum Gen{link.max_gen} "
        f"x{link.max_width}, read at idle (idle GPUs train down; the transfer benchmark "
        "reads it under load)",
        evidence=link.model_dump(),
        fix="run 'clusterbench run --only transfer'; if the link stays low under load, "
        "reseat the GPU or check the slot and BIOS",
    )


def check_pcie_link(src: Sources) -> list[Finding]:
    """Each GPU's PCIe link against its maximum, and that maximum against the SKU's."""
    found = (_slot_limited(src, gpu) or _below_max(src, gpu) for gpu in src.host.gpus)
    return [f for f in found if f is not None]


# ---------------------------------------------------------------------------- ACS


def parse_acs_enabled(lspci_text: str) -> dict[str, str]:
    """PCI address -> description of each device whose ``ACSCtl`` has ``SrcValid+``.

    ``lspci -vvv`` prints capabilities only to root ("<access denied>" otherwise): then {}.
    """
    enabled: dict[str, str] = {}
    current: tuple[str, str] | None = None
    for line in lspci_text.splitlines():
        header = _LSPCI_HEADER.match(line)
        if header is not None:
            current = (normalize_pci_bus_id(header.group(1)), header.group(2).strip())
        elif current is not None and "ACSCtl:" in line and "SrcValid+" in line:
            enabled[current[0]] = current[1]
    return enabled


def upstream_bridges(root: Path, bus_id: str) -> list[str]:
    """PCI addresses of the bridges above a device, root port first (from its sysfs path)."""
    try:
        resolved = pci_device_dir(root, bus_id).resolve(strict=True)
    except OSError:
        return []
    parts = [p for p in resolved.parts if PCI_ADDRESS.match(p)]
    return parts[:-1] if parts and parts[-1] == bus_id else parts


def _endpoints(src: Sources) -> list[str]:
    gpus = [g.pci_bus_id for g in src.host.gpus if g.pci_bus_id]
    nics = [n.pci_bus_id for n in src.host.nics if n.kind in RDMA_KINDS and n.pci_bus_id]
    return [*gpus, *nics]


def check_acs(src: Sources) -> list[Finding]:
    """ACS (source validation) on bridges above GPUs or RDMA NICs: P2P and GPUDirect RDMA
    traffic is then routed up to the root complex instead of through the PCIe switch."""
    if not src.host.gpus:
        return []
    out = src.run(["lspci", "-D", "-vvv"])
    if out is None:
        return []  # lspci missing or failed: nothing to tell
    enabled = parse_acs_enabled(out)
    above = {b for bus in _endpoints(src) for b in upstream_bridges(src.root, bus)}
    hits = {bus: enabled[bus] for bus in sorted(above & set(enabled))}
    if not hits:
        return []
    fixes = "; ".join(f"setpci -s {bus} ECAP_ACS+0x6.w=0000" for bus in hits)
    return [
        Finding(
            id="doctor.pcie.acs",
            severity="warn",
            scope=src.scope,
            message=f"ACS is enabled on {len(hits)} PCIe bridge(s) above the GPUs/NICs: GPU "
            "peer-to-peer and GPUDirect RDMA go through the CPU root complex (slow or hangs)",
            evidence={"bridges": hits},
            fix=f"disable ACS in the BIOS, or at boot: {fixes} (bare metal only; VMs need ACS "
            "for device isolation)",
        )
    ]


# ---------------------------------------------------------------------------- GPU-NIC distance


def _distance(src: Sources, gpu: GpuInfo, nic: NicInfo) -> str:
    gpu_up = upstream_bridges(src.root, gpu.pci_bus_id) if gpu.pci_bus_id else []
    nic_up = upstream_bridges(src.root, nic.pci_bus_id) if nic.pci_bus_id else []
    if set(gpu_up[1:]) & set(nic_up[1:]):
        return "same PCIe switch"
    if gpu_up and nic_up and gpu_up[0] == nic_up[0]:
        return "same root port"
    if gpu.numa_node is None or nic.numa_node is None:
        return "unknown"
    return "same NUMA node" if gpu.numa_node == nic.numa_node else "across sockets"


_RANK = ("same PCIe switch", "same root port", "same NUMA node", "across sockets", "unknown")


def nearest_nic(src: Sources, gpu: GpuInfo) -> tuple[NicInfo, str] | None:
    """The RDMA NIC nearest ``gpu`` and how near (same PCIe switch, same root port, same NUMA
    node, across sockets, unknown); None without an RDMA NIC.  Ties go to the first by name."""
    nics = [n for n in src.host.nics if n.kind in RDMA_KINDS]
    if not nics:
        return None
    dist, _, nic = min(
        ((_RANK.index(_distance(src, gpu, n)), n.name, n) for n in nics), key=lambda t: t[:2]
    )
    return nic, _RANK[dist]


def check_gpu_nic_distance(src: Sources) -> list[Finding]:
    """The nearest RDMA NIC of each GPU: same PCIe switch, same NUMA node, or across sockets."""
    if not src.host.gpus:
        return []
    nearest: dict[str, dict[str, str]] = {}
    for gpu in src.host.gpus:
        found = nearest_nic(src, gpu)
        if found is None:
            return []
        nic, distance = found
        nearest[str(gpu.index)] = {"nic": nic.name, "distance": distance}
    far = sorted(g for g, v in nearest.items() if v["distance"] == "across sockets")
    message = "nearest RDMA NIC per GPU: " + ", ".join(
        f"GPU {g} {v['nic']} ({v['distance']})" for g, v in nearest.items()
    )
    return [
        Finding(
            id="doctor.pcie.gpu_nic_distance",
            severity="info",
            scope=src.scope,
            message=message,
            evidence={"nearest": nearest, "across_sockets": far},
            fix=""
            if not far
            else "GPUs without a NIC on their socket send inter-node traffic "
            "over the CPU interconnect: place NICs per socket/switch, or check NCCL_IB_HCA",
        )
    ]


CHECKS: tuple[Check, ...] = (check_pcie_link, check_acs, check_gpu_nic_distance)
