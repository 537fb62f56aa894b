"""Host inventory: GPUs (NVML, else torch + sysfs), CPU, NICs, versions and GPU topology.

Every reader takes the filesystem root (``/`` by default; tests pass a fake sysfs/proc tree) and
the NVML module (``pynvml`` by default; tests pass a stand-in).  With NVML present the probe
uses NVML only and never creates a CUDA context.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import platform
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import psutil

from clusterbench.hardware.specs import match_spec, pcie_gen_from_rate, to_spec_ref
from clusterbench.hardware.topology import (
    active_nvlinks,
    gpu_topology,
    nvml_bus_id,
    nvml_query,
    text,
    torch_pci_bus_id,
    torch_topology,
)
from clusterbench.schema import CpuInfo, GpuInfo, HostInfo, NicInfo, PCIeLink, Topology

__all__ = [
    "AUTO",
    "load_nvml",
    "numa_node_cpus",
    "nvml_session",
    "parse_cpulist",
    "probe_cpu",
    "probe_gpus",
    "probe_host",
    "probe_nics",
    "probe_versions",
    "read_pcie_link",
    "sysfs_pcie_link",
]

log = logging.getLogger(__name__)

AUTO: Any = object()
"""Default for ``nvml=``: import ``pynvml`` and initialise it (None if that fails)."""

NicKind = Literal["infiniband", "roce", "efa", "ethernet", "other"]
# linux/if_arp.h: ARPHRD_ETHER = 1, ARPHRD_INFINIBAND = 32 (IPoIB)
_ARPHRD_ETHER = 1
_ARPHRD_INFINIBAND = 32
_PCI_ADDRESS = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


# ---------------------------------------------------------------------------- NVML session


def load_nvml() -> Any | None:
    """``pynvml`` after ``nvmlInit``, or None without the bindings or the driver library."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        log.debug("nvmlInit failed: %s", exc)
        return None
    return pynvml


@contextlib.contextmanager
def nvml_session(nvml: Any = AUTO) -> Iterator[Any | None]:
    """Yield an initialised NVML (or None); shut it down after if this session started it."""
    if nvml is not AUTO:
        yield nvml
        return
    lib = load_nvml()
    try:
        yield lib
    finally:
        if lib is not None:
            nvml_query(lib, "nvmlShutdown")


# ---------------------------------------------------------------------------- small readers


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _read_int(path: Path) -> int | None:
    raw = _read(path)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _numa_of(device_dir: Path) -> int | None:
    node = _read_int(device_dir / "numa_node")
    return None if node is None or node < 0 else node


def _pci_address_of(device_link: Path) -> str | None:
    """PCI address of a sysfs ``device`` link (a virtio or USB child reports its parent)."""
    try:
        resolved = device_link.resolve(strict=True)
    except OSError:
        return None
    for part in (resolved, *list(resolved.parents)[:2]):
        if _PCI_ADDRESS.match(part.name):
            return part.name
    return None


def _pci_device_dir(root: Path, bus_id: str) -> Path:
    return root / "sys/bus/pci/devices" / bus_id


# ---------------------------------------------------------------------------- GPUs


def _parse_link_speed(raw: str | None) -> int | None:
    """``32.0 GT/s PCIe`` -> 5."""
    if not raw:
        return None
    try:
        return pcie_gen_from_rate(float(raw.split()[0]))
    except ValueError:
        return None


def sysfs_pcie_link(root: str | Path, bus_id: str) -> PCIeLink:
    """Current and maximum PCIe link of a PCI device, from sysfs."""
    device = _pci_device_dir(Path(root), bus_id)
    return PCIeLink(
        gen=_parse_link_speed(_read(device / "current_link_speed")),
        width=_read_int(device / "current_link_width"),
        max_gen=_parse_link_speed(_read(device / "max_link_speed")),
        max_width=_read_int(device / "max_link_width"),
    )


def _nvml_pcie_link(nvml: Any, handle: Any) -> PCIeLink:
    return PCIeLink(
        gen=nvml_query(nvml, "nvmlDeviceGetCurrPcieLinkGeneration", handle),
        width=nvml_query(nvml, "nvmlDeviceGetCurrPcieLinkWidth", handle),
        max_gen=nvml_query(nvml, "nvmlDeviceGetMaxPcieLinkGeneration", handle),
        max_width=nvml_query(nvml, "nvmlDeviceGetMaxPcieLinkWidth", handle),
    )


def _gpu_info(
    *,
    index: int,
    name: str,
    memory_bytes: int | None,
    bus_id: str | None,
    root: Path,
) -> GpuInfo:
    spec = match_spec(name, memory_bytes)
    return GpuInfo(
        index=index,
        name=name,
        pci_bus_id=bus_id,
        memory_bytes=memory_bytes,
        numa_node=_numa_of(_pci_device_dir(root, bus_id)) if bus_id else None,
        spec=to_spec_ref(spec) if spec is not None else None,
    )


def _nvml_gpu(nvml: Any, index: int, root: Path) -> GpuInfo:
    handle = nvml_query(nvml, "nvmlDeviceGetHandleByIndex", index)
    if handle is None:
        return GpuInfo(index=index, name="unknown")
    memory = nvml_query(nvml, "nvmlDeviceGetMemoryInfo", handle)
    info = _gpu_info(
        index=index,
        name=text(nvml_query(nvml, "nvmlDeviceGetName", handle)) or "unknown",
        memory_bytes=int(memory.total) if memory is not None else None,
        bus_id=nvml_bus_id(nvml, handle),
        root=root,
    )
    links = active_nvlinks(nvml, handle)
    return info.model_copy(
        update={
            "uuid": text(nvml_query(nvml, "nvmlDeviceGetUUID", handle)),
            "pcie": _nvml_pcie_link(nvml, handle),
            "nvlink_active": len(links) if links is not None else None,
        }
    )


def _torch_gpus(root: Path) -> list[GpuInfo]:
    """GPUs through torch.cuda (CUDA or ROCm) when NVML is absent; PCIe from sysfs."""
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    gpus = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        bus_id = torch_pci_bus_id(index)
        info = _gpu_info(
            index=index, name=props.name, memory_bytes=props.total_memory, bus_id=bus_id, root=root
        )
        if bus_id is not None:
            info = info.model_copy(update={"pcie": sysfs_pcie_link(root, bus_id)})
        gpus.append(info)
    return gpus


def probe_gpus(nvml: Any | None, *, root: str | Path = "/") -> list[GpuInfo]:
    """Every GPU of the host: NVML if given (no CUDA context), else torch.cuda; [] without."""
    if nvml is None:
        return _torch_gpus(Path(root))
    count = nvml_query(nvml, "nvmlDeviceGetCount") or 0
    return [_nvml_gpu(nvml, index, Path(root)) for index in range(count)]


def read_pcie_link(index: int, *, nvml: Any = AUTO, root: str | Path = "/") -> PCIeLink | None:
    """The PCIe link of GPU ``index`` right now (idle GPUs down-train; read it under load).

    ``index`` is the NVML index when NVML is present, else the torch device index.
    """
    with nvml_session(nvml) as lib:
        if lib is not None:
            handle = nvml_query(lib, "nvmlDeviceGetHandleByIndex", index)
            return _nvml_pcie_link(lib, handle) if handle is not None else None
    try:
        bus_id = torch_pci_bus_id(index)
    except (ImportError, RuntimeError, AssertionError) as exc:  # no torch / no such device
        log.debug("no PCI address for torch device %d: %s", index, exc)
        return None
    return sysfs_pcie_link(root, bus_id) if bus_id else None


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
        cpulist = _read(node / "cpulist")
        if cpulist is not None:
            found[int(node.name.removeprefix("node"))] = cpulist
    return dict(sorted(found.items()))


def numa_node_cpus(root: str | Path = "/") -> dict[int, list[int]]:
    """NUMA node -> its CPUs, from sysfs (for pinning workers)."""
    return {node: parse_cpulist(cpus) for node, cpus in _numa_cpulists(Path(root)).items()}


def _cpuinfo_fields(root: Path, key: str) -> list[str]:
    values = []
    for line in (_read(root / "proc/cpuinfo") or "").splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == key:
            values.append(value.strip())
    return values


def _socket_count(root: Path) -> int | None:
    ids = set(_cpuinfo_fields(root, "physical id"))
    if not ids:  # e.g. arm64: no "physical id" in /proc/cpuinfo
        cpus = root / "sys/devices/system/cpu"
        ids = {_read(p) or "" for p in cpus.glob("cpu[0-9]*/topology/physical_package_id")}
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
        link_layer = _read(port / "link_layer")
        nics.append(
            NicInfo(
                name=dev.name,
                kind=_rdma_kind(dev.name, driver, link_layer),
                state=_parse_ib_state(_read(port / "state")),
                rate_gbps=_parse_ib_rate(_read(port / "rate")),
                link_layer=link_layer,
                numa_node=_numa_of(device),
                pci_bus_id=_pci_address_of(device),
                port=int(port.name),
            )
        )
    return nics


def _net_speed_gbps(iface: Path) -> float | None:
    speed_mbps = _read_int(iface / "speed")  # unreadable while the link is down
    if speed_mbps is None or speed_mbps <= 0 or speed_mbps >= 2**32 - 1:
        return None  # -1 (or the unsigned -1) means unknown
    return speed_mbps / 1000


def _ethernet_nic(iface: Path) -> NicInfo:
    arp_type = _read_int(iface / "type")
    kind: NicKind = "ethernet" if arp_type == _ARPHRD_ETHER else "other"
    link_layer = {_ARPHRD_ETHER: "Ethernet", _ARPHRD_INFINIBAND: "InfiniBand"}.get(arp_type or -1)
    return NicInfo(
        name=iface.name,
        kind=kind,
        state=_read(iface / "operstate"),
        rate_gbps=_net_speed_gbps(iface),
        link_layer=link_layer,
        numa_node=_numa_of(iface / "device"),
        pci_bus_id=_pci_address_of(iface / "device"),
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


# ---------------------------------------------------------------------------- versions


def _package_version() -> str:
    try:
        return importlib.metadata.version("clusterbench")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def _nccl_version(torch: Any) -> str | None:
    try:
        version = torch.cuda.nccl.version()
    except (AttributeError, RuntimeError) as exc:  # CPU or ROCm-less builds lack NCCL
        log.debug("no NCCL version: %s", exc)
        return None
    if isinstance(version, tuple):
        return ".".join(str(v) for v in version)
    # Old torch: one int, NCCL_VERSION_CODE of nccl.h: major*1000+minor*100+patch before
    # NCCL 2.9 (2708), major*10000+minor*100+patch since (20903).
    code = int(version)
    major, rest = divmod(code, 10000 if code >= 10000 else 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def _torch_versions() -> dict[str, str]:
    try:
        import torch
    except ImportError:
        return {}
    found = {
        "torch": str(torch.__version__),
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "nccl": _nccl_version(torch),
    }
    return {key: value for key, value in found.items() if value}


def _nvml_versions(nvml: Any) -> dict[str, str]:
    found: dict[str, str] = {}
    driver = text(nvml_query(nvml, "nvmlSystemGetDriverVersion"))
    if driver:
        found["driver"] = driver
    cuda = nvml_query(nvml, "nvmlSystemGetCudaDriverVersion")  # e.g. 12080
    if cuda is not None:
        found["nvml_cuda"] = f"{int(cuda) // 1000}.{int(cuda) % 1000 // 10}"
    return found


def probe_versions(nvml: Any | None) -> dict[str, str]:
    """Python, torch, CUDA/HIP, NCCL, driver, kernel and clusterbench versions."""
    versions = {
        "python": platform.python_version(),
        "kernel": platform.release(),
        "clusterbench": _package_version(),
        **_torch_versions(),
    }
    if nvml is not None:
        versions.update(_nvml_versions(nvml))
    return versions


# ---------------------------------------------------------------------------- host


def probe_host(*, root: str | Path = "/", nvml: Any = AUTO) -> HostInfo:
    """Everything about this host that results.json records."""
    with nvml_session(nvml) as lib:
        gpus = probe_gpus(lib, root=root)
        topology = Topology()
        if lib is not None and gpus:
            topology = gpu_topology(lib)
        elif gpus:
            topology = torch_topology(len(gpus))
        versions = probe_versions(lib)
    return HostInfo(
        hostname=socket.gethostname(),
        gpus=gpus,
        cpu=probe_cpu(root),
        nics=probe_nics(root),
        versions=versions,
        topology=topology,
    )
