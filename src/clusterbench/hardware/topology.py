"""GPU-to-GPU connectivity, the matrix ``nvidia-smi topo -m`` prints, and NVML helpers.

NVML calls stay in ``hardware/``; every query goes through :func:`nvml_query`, so one query
that fails leaves one field unknown and never ends the probe.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from clusterbench.schema import Topology

__all__ = [
    "UNKNOWN_LINK",
    "NvLinkPeer",
    "active_nvlinks",
    "gpu_topology",
    "normalize_pci_bus_id",
    "nvml_bus_id",
    "nvml_query",
    "text",
    "topology_from_links",
    "torch_pci_bus_id",
    "torch_topology",
]

log = logging.getLogger(__name__)

# nvml.h nvmlGpuTopologyLevel_t -> the labels of `nvidia-smi topo -m`.
_LEVEL_LABELS: dict[int, str] = {
    0: "PIX",  # NVML_TOPOLOGY_INTERNAL (same board)
    10: "PIX",  # NVML_TOPOLOGY_SINGLE: one PCIe switch
    20: "PXB",  # NVML_TOPOLOGY_MULTIPLE: several PCIe switches
    30: "PHB",  # NVML_TOPOLOGY_HOSTBRIDGE
    40: "NODE",  # NVML_TOPOLOGY_NODE: host bridges of one NUMA node
    50: "SYS",  # NVML_TOPOLOGY_SYSTEM: across the CPU interconnect
}
UNKNOWN_LINK = "?"
# nvml.h: NVML_P2P_CAPS_INDEX_READ = 0 (nvidia-ml-py 13 binds it as the tuple (0,), a stray
# comma, which ctypes rejects), NVML_P2P_STATUS_OK = 0, NVML_FEATURE_ENABLED = 1,
# NVML_NVLINK_DEVICE_TYPE_SWITCH = 2, NVML_NVLINK_MAX_LINKS = 18 before NVML 12.8 (36 since).
_P2P_CAPS_INDEX_READ = 0
_P2P_STATUS_OK = 0
_FEATURE_ENABLED = 1
_NVLINK_DEVICE_TYPE_SWITCH = 2
_NVLINK_MAX_LINKS_DEFAULT = 18

_BUS_ID = re.compile(r"^(?:([0-9a-fA-F]+):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$")


def nvml_query(nvml: Any, fn_name: str, *args: Any) -> Any | None:
    """``nvml.<fn_name>(*args)``, or None when NVML reports an error or lacks the function."""
    fn = getattr(nvml, fn_name, None)
    if fn is None:
        log.debug("NVML binding lacks %s", fn_name)
        return None
    try:
        return fn(*args)
    except nvml.NVMLError as exc:
        log.debug("NVML %s%s failed: %s", fn_name, args[1:], exc)
        return None


def text(value: object) -> str | None:
    """A str from an NVML answer (older bindings return bytes)."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode(errors="replace").strip("\x00 ")
    return str(value).strip()


def normalize_pci_bus_id(bus_id: str) -> str:
    """The sysfs form of a PCI address: NVML's ``00000000:18:00.0`` -> ``0000:18:00.0``."""
    match = _BUS_ID.match(bus_id.strip())
    if match is None:
        raise ValueError(f"not a PCI bus id: {bus_id!r}")
    domain, bus, device, function = match.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{function}"


def nvml_bus_id(nvml: Any, handle: Any) -> str | None:
    """The sysfs-form PCI address of an NVML device."""
    info = nvml_query(nvml, "nvmlDeviceGetPciInfo", handle)
    raw = text(getattr(info, "busId", None))
    return _safe_bus_id(raw)


def _safe_bus_id(raw: str | None) -> str | None:
    if not raw:
        return None
    try:
        return normalize_pci_bus_id(raw)
    except ValueError:
        log.debug("unparsable PCI bus id %r", raw)
        return None


def active_nvlinks(nvml: Any, handle: Any) -> list[int] | None:
    """Indices of a device's enabled NVLinks; None when NVML gives no handle."""
    if handle is None:
        return None
    max_links = getattr(nvml, "NVML_NVLINK_MAX_LINKS", _NVLINK_MAX_LINKS_DEFAULT)
    links: list[int] = []
    for link in range(max_links):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(handle, link)
        except nvml.NVMLError:
            break  # past the last link, or no NVLink at all
        if state == _FEATURE_ENABLED:
            links.append(link)
    return links


@dataclass(frozen=True, slots=True)
class NvLinkPeer:
    """The far end of one active NVLink."""

    pci_bus_id: str | None
    is_switch: bool = False
    """An NVSwitch: the link reaches every GPU that has a link to the same switch."""


def _nvlink_count(
    links_i: Sequence[NvLinkPeer], links_j: Sequence[NvLinkPeer], bus_j: str | None
) -> int:
    switches_j = {p.pci_bus_id for p in links_j if p.is_switch}
    direct = sum(1 for p in links_i if not p.is_switch and bus_j and p.pci_bus_id == bus_j)
    switched = sum(1 for p in links_i if p.is_switch and p.pci_bus_id in switches_j)
    return direct + switched


def _cell(
    i: int,
    j: int,
    *,
    bus_ids: Sequence[str | None],
    links: Sequence[Sequence[NvLinkPeer]],
    levels: Sequence[Sequence[int | None]],
) -> str:
    if i == j:
        return "X"
    num_links = _nvlink_count(links[i], links[j], bus_ids[j])
    if num_links > 0:
        return f"NV{num_links}"
    level = levels[i][j]
    return UNKNOWN_LINK if level is None else _LEVEL_LABELS.get(level, UNKNOWN_LINK)


def topology_from_links(
    *,
    bus_ids: Sequence[str | None],
    links: Sequence[Sequence[NvLinkPeer]],
    levels: Sequence[Sequence[int | None]],
    p2p: Sequence[Sequence[bool]],
) -> Topology:
    """Build the matrix: X, NV<n> (active NVLinks i->j, direct or through a shared NVSwitch),
    else the PCIe common-ancestor label of ``levels[i][j]`` (NVML topology level), else ``?``.
    """
    num = len(bus_ids)
    if not len(links) == len(levels) == len(p2p) == num:
        raise ValueError("bus_ids, links, levels and p2p must have one entry per GPU")
    matrix = [
        [_cell(i, j, bus_ids=bus_ids, links=links, levels=levels) for j in range(num)]
        for i in range(num)
    ]
    return Topology(
        devices=[f"GPU{i}" for i in range(num)],
        matrix=matrix,
        p2p=[[bool(v) for v in row] for row in p2p],
    )


def _link_peers(nvml: Any, handle: Any, gpu_bus_ids: set[str]) -> list[NvLinkPeer]:
    peers: list[NvLinkPeer] = []
    for link in active_nvlinks(nvml, handle) or []:
        info = nvml_query(nvml, "nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
        bus = _safe_bus_id(text(getattr(info, "busId", None)))
        kind = nvml_query(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
        # NVML lists every GPU of the host, so a far end that is none of them is a switch.
        is_switch = (
            kind == _NVLINK_DEVICE_TYPE_SWITCH if kind is not None else bus not in gpu_bus_ids
        )
        peers.append(NvLinkPeer(pci_bus_id=bus, is_switch=is_switch))
    return peers


def _level(nvml: Any, a: Any, b: Any) -> int | None:
    if a is None or b is None:
        return None
    level = nvml_query(nvml, "nvmlDeviceGetTopologyCommonAncestor", a, b)
    return int(level) if level is not None else None


def _p2p_ok(nvml: Any, a: Any, b: Any) -> bool | None:
    if a is None or b is None:
        return None
    status = nvml_query(nvml, "nvmlDeviceGetP2PStatus", a, b, _P2P_CAPS_INDEX_READ)
    return None if status is None else status == _P2P_STATUS_OK


def gpu_topology(nvml: Any) -> Topology:
    """The GPU connectivity matrix and P2P (read) matrix of this host from NVML."""
    count = nvml_query(nvml, "nvmlDeviceGetCount") or 0
    handles = [nvml_query(nvml, "nvmlDeviceGetHandleByIndex", i) for i in range(count)]
    bus_ids = [nvml_bus_id(nvml, h) if h is not None else None for h in handles]
    known = {b for b in bus_ids if b}
    links = [_link_peers(nvml, h, known) if h is not None else [] for h in handles]
    levels = [[_level(nvml, a, b) for b in handles] for a in handles]
    answers = [
        [_p2p_ok(nvml, a, b) if i != j else False for j, b in enumerate(handles)]
        for i, a in enumerate(handles)
    ]
    p2p = _fill_p2p_from_torch(answers, bus_ids)
    return topology_from_links(bus_ids=bus_ids, links=links, levels=levels, p2p=p2p)


def _fill_p2p_from_torch(
    answers: list[list[bool | None]], bus_ids: list[str | None]
) -> list[list[bool]]:
    """Answer the pairs NVML could not with torch.cuda.can_device_access_peer (initialises CUDA)."""
    num = len(answers)
    missing = [(i, j) for i in range(num) for j in range(num) if i != j and answers[i][j] is None]
    torch_index = _torch_index_by_bus(bus_ids) if missing else {}
    filled = [[bool(v) for v in row] for row in answers]
    for i, j in missing:
        a, b = torch_index.get(i), torch_index.get(j)
        filled[i][j] = a is not None and b is not None and _torch_can_access(a, b)
    return filled


def _torch_index_by_bus(bus_ids: list[str | None]) -> dict[int, int]:
    """NVML index -> torch device index, matched by PCI address (CUDA_VISIBLE_DEVICES-proof)."""
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    by_bus = {torch_pci_bus_id(k): k for k in range(torch.cuda.device_count())}
    return {i: by_bus[b] for i, b in enumerate(bus_ids) if b is not None and b in by_bus}


def _torch_can_access(a: int, b: int) -> bool:
    import torch

    try:
        return bool(torch.cuda.can_device_access_peer(a, b))
    except RuntimeError as exc:
        log.debug("can_device_access_peer(%d, %d) failed: %s", a, b, exc)
        return False


def torch_pci_bus_id(index: int) -> str | None:
    """The sysfs-form PCI address of torch device ``index`` (CUDA or ROCm)."""
    import torch

    props = torch.cuda.get_device_properties(index)
    bus = getattr(props, "pci_bus_id", None)
    if bus is None:
        return None
    domain = getattr(props, "pci_domain_id", 0) or 0
    device = getattr(props, "pci_device_id", 0) or 0
    return f"{domain:04x}:{bus:02x}:{device:02x}.0"


def torch_topology(num_gpus: int) -> Topology:
    """Without NVML (AMD, or no driver library): P2P from torch, links unknown (``?``)."""
    p2p = [[i != j and _torch_can_access(i, j) for j in range(num_gpus)] for i in range(num_gpus)]
    return topology_from_links(
        bus_ids=[None] * num_gpus,
        links=[[] for _ in range(num_gpus)],
        levels=[[None] * num_gpus for _ in range(num_gpus)],
        p2p=p2p,
    )
