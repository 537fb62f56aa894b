"""sysfs and /proc readers: PCI devices, CPU and NUMA layout, RDMA and Ethernet NICs.

Every reader takes the filesystem root (``/`` by default; tests pass a fake tree).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import psutil

from clusterbench.schema import CpuInfo, NicInfo

__all__ = [
    "PCI_ADDRESS",
    "RDMA_KINDS",
    "mount_of",
    "numa_node_cpus",
    "numa_of",
    "parse_cpulist",
    "pci_address_of",
    "pci_device_dir",
    "probe_cpu",
    "probe_nics",
    "read_int",
    "read_text",
]

NicKind = Literal["infiniband", "roce", "efa", "ethernet", "other"]
RDMA_KINDS: tuple[NicKind, ...] = ("infiniband", "roce", "efa")
"""NIC kinds that do RDMA (GPUDirect, NCCL's net plugins)."""
# linux/if_arp.h: ARPHRD_ETHER = 1, ARPHRD_INFINIBAND = 32 (IPoIB)
_ARPHRD_ETHER = 1
_ARPHRD_INFINIBAND = 32
PCI_ADDRESS = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")

# ---------------------------------------------------------------------------- small readers


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def mount_of(mounts_text: str, path: str) -> tuple[str, str] | None:
    """(mount point, file system type) of the longest mount point above ``path``."""
    best: tuple[str, str] | None = None
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")  # /proc/mounts escapes spaces
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, fields[2])
    return best


def read_int(path: Path) -> int | None:
    raw = read_text(path)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def numa_of(device_dir: Path) -> int | None:
    node = read_int(device_dir / "numa_node")
    return None if node is None or node < 0 else node


def pci_address_of(device_link: Path) -> str | None:
    """PCI address of a sysfs ``device`` link (a virtio or USB child reports its parent)."""
    try:
        resolved = device_link.resolve(strict=True)
    except OSError:
        return None
    for part in (resolved, *list(resolved.parents)[:2]):
        if PCI_ADDRESS.match(part.name):
            return part.name
    return None


def pci_device_dir(root: Path, bus_id: str) -> Path:
    return root / "sys/bus/pci/devices" / bus_id


# ---------------------------------------------------------------------------- CPU


def parse_cpulist(cpulist: str) -> list[int]:
    """The kernel's cpulist format: ``"0-3,8"`` -> ``[0, 1, 2, 3, 8]``."""
    cpus: list[int] = []
    for part in cpulist.strip().split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        try:
            cpus.extend(range(int(first), int(last or first) + 1))
        except ValueError:
            raise ValueError(f"bad cpulist {cpulist!r}") from None
    return cpus


def _numa_cpulists(root: Path) -> dict[int, str]:
    nodes = root / "sys/devices/system/node"
    found: dict[int, str] = {}
    for node in nodes.glob("node[0-9]*"):
        cpulist = read_text(node / "cpulist")
        if cpulist is not None:
            found[int(node.name.removeprefix("node"))] = cpulist
    return dict(sorted(found.items()))


def numa_node_cpus(root: str | Path = "/") -> dict[int, list[int]]:
    """NUMA node -> its CPUs, from sysfs (for pinning workers)."""
    return {node: parse_cpulist(cpus) for node, cpus in _numa_cpulists(Path(root)).items()}


def _cpuinfo_fields(root: Path, key: str) -> list[str]:
    values = []
    for line in (read_text(root / "proc/cpuinfo") or "").splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == key:
            values.append(value.strip())
    return values


def _socket_count(root: Path) -> int | None:
    ids = set(_cpuinfo_fields(root, "physical id"))
    if not ids:  # e.g. arm64: no "physical id" in /proc/cpuinfo
        cpus = root / "sys/devices/system/cpu"
        ids = {read_text(p) or "" for p in cpus.glob("cpu[0-9]*/topology/physical_package_id")}
    return len(ids) or None


def probe_cpu(root: str | Path = "/") -> CpuInfo:
    """CPU model, sockets, cores, threads and NUMA nodes."""
    base = Path(root)
    models = _cpuinfo_fields(base, "model name")
    return CpuInfo(
        model=models[0] if models else None,
        sockets=_socket_count(base),
        cores=psutil.cpu_count(logical=False),
        threads=psutil.cpu_count(logical=True),
        numa_nodes={str(node): cpus for node, cpus in _numa_cpulists(base).items()},
    )


# ---------------------------------------------------------------------------- NICs


def _parse_ib_rate(raw: str | None) -> float | None:
    """``400 Gb/sec (4X NDR)`` -> 400.0."""
    try:
        return float(raw.split()[0]) if raw else None
    except ValueError:
        return None


def _parse_ib_state(raw: str | None) -> str | None:
    """``4: ACTIVE`` -> ``ACTIVE``."""
    if not raw:
        return None
    return raw.partition(":")[2].strip() or raw


_LINK_LAYER_KIND: dict[str, NicKind] = {"InfiniBand": "infiniband", "Ethernet": "roce"}


def _rdma_kind(name: str, driver: str | None, link_layer: str | None) -> NicKind:
    if name.startswith("efa") or driver == "efa":
        return "efa"
    return _LINK_LAYER_KIND.get(link_layer or "", "other")


def _rdma_ports(dev: Path) -> list[NicInfo]:
    device = dev / "device"
    driver_link = device / "driver"
    driver = driver_link.resolve().name if driver_link.is_symlink() else None
    ports = sorted((dev / "ports").glob("[0-9]*"), key=lambda p: int(p.name))
    nics = []
    for port in ports:
        link_layer = read_text(port / "link_layer")
        nics.append(
            NicInfo(
                name=dev.name,
                kind=_rdma_kind(dev.name, driver, link_layer),
                state=_parse_ib_state(read_text(port / "state")),
                rate_gbps=_parse_ib_rate(read_text(port / "rate")),
                link_layer=link_layer,
                numa_node=numa_of(device),
                pci_bus_id=pci_address_of(device),
                port=int(port.name),
            )
        )
    return nics


def _net_speed_gbps(iface: Path) -> float | None:
    speed_mbps = read_int(iface / "speed")  # unreadable while the link is down
    if speed_mbps is None or speed_mbps <= 0 or speed_mbps >= 2**32 - 1:
        return None  # -1 (or the unsigned -1) means unknown
    return speed_mbps / 1000


def _ethernet_nic(iface: Path) -> NicInfo:
    arp_type = read_int(iface / "type")
    kind: NicKind = "ethernet" if arp_type == _ARPHRD_ETHER else "other"
    link_layer = {_ARPHRD_ETHER: "Ethernet", _ARPHRD_INFINIBAND: "InfiniBand"}.get(arp_type or -1)
    return NicInfo(
        name=iface.name,
        kind=kind,
        state=read_text(iface / "operstate"),
        rate_gbps=_net_speed_gbps(iface),
        link_layer=link_layer,
        numa_node=numa_of(iface / "device"),
        pci_bus_id=pci_address_of(iface / "device"),
    )


def probe_nics(root: str | Path = "/") -> list[NicInfo]:
    """RDMA ports (InfiniBand, RoCE, EFA) and physical network interfaces."""
    base = Path(root)
    rdma = base / "sys/class/infiniband"
    nics = [nic for dev in sorted(rdma.glob("*")) for nic in _rdma_ports(dev)]
    for iface in sorted((base / "sys/class/net").glob("*")):
        if iface.name != "lo" and (iface / "device").exists():  # virtual ones have no device
            nics.append(_ethernet_nic(iface))
    return nics
