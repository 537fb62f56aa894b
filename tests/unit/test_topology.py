"""The GPU connectivity matrix, from plain link data and from a stand-in NVML."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from clusterbench.hardware.topology import (
    NvLinkPeer,
    gpu_topology,
    normalize_pci_bus_id,
    topology_from_links,
)

# nvml.h nvmlGpuTopologyLevel_t
SINGLE, HOSTBRIDGE, NODE, SYSTEM = 10, 30, 40, 50


def _no_p2p(num: int) -> list[list[bool]]:
    return [[False] * num for _ in range(num)]


def test_direct_nvlinks_count_per_pair() -> None:
    buses = ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0"]
    links = [
        [NvLinkPeer(buses[1])] * 12 + [NvLinkPeer(buses[2])] * 6,
        [NvLinkPeer(buses[0])] * 12,
        [NvLinkPeer(buses[0])] * 6,
    ]
    levels: list[list[int | None]] = [[None, NODE, SYSTEM], [NODE, None, SYSTEM], [SYSTEM] * 3]
    topo = topology_from_links(bus_ids=buses, links=links, levels=levels, p2p=_no_p2p(3))
    assert topo.devices == ["GPU0", "GPU1", "GPU2"]
    assert topo.matrix == [
        ["X", "NV12", "NV6"],
        ["NV12", "X", "SYS"],
        ["NV6", "SYS", "X"],
    ]


def test_links_through_a_shared_nvswitch_connect_every_pair() -> None:
    switches = ["0000:c0:00.0", "0000:c1:00.0", "0000:c2:00.0", "0000:c3:00.0"]
    # HGX H100/H200: 5 + 4 + 4 + 5 links to four NVSwitches.
    per_gpu = [
        NvLinkPeer(s, is_switch=True)
        for s, n in zip(switches, (5, 4, 4, 5), strict=True)
        for _ in range(n)
    ]
    buses = ["0000:18:00.0", "0000:2a:00.0", "0000:9a:00.0"]
    levels: list[list[int | None]] = [[None, SINGLE, HOSTBRIDGE], [SINGLE, None, HOSTBRIDGE]]
    levels.append([HOSTBRIDGE] * 3)
    topo = topology_from_links(
        bus_ids=buses, links=[per_gpu, per_gpu, []], levels=levels, p2p=_no_p2p(3)
    )
    assert topo.matrix[0] == ["X", "NV18", "PHB"]
    assert topo.matrix[1] == ["NV18", "X", "PHB"]
    assert topo.matrix[2] == ["PHB", "PHB", "X"]


def test_pcie_levels_and_unknown() -> None:
    levels: list[list[int | None]] = [[None, 0, 20, 30, None], [0] * 5, [20] * 5, [30] * 5]
    levels.append([None] * 5)
    topo = topology_from_links(
        bus_ids=[None] * 5, links=[[] for _ in range(5)], levels=levels, p2p=_no_p2p(5)
    )
    assert topo.matrix[0] == ["X", "PIX", "PXB", "PHB", "?"]


def test_lengths_must_agree() -> None:
    with pytest.raises(ValueError, match="one entry per GPU"):
        topology_from_links(bus_ids=["a"], links=[], levels=[[None]], p2p=[[False]])


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("00000000:18:00.0", "0000:18:00.0"),
        ("00000000:9A:00.0", "0000:9a:00.0"),
        ("0001:3b:00.1", "0001:3b:00.1"),
        ("18:00.0", "0000:18:00.0"),
    ],
)
def test_normalize_pci_bus_id(raw: str, normal: str) -> None:
    assert normalize_pci_bus_id(raw) == normal


def test_normalize_pci_bus_id_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="PCI bus id"):
        normalize_pci_bus_id("GPU-1234")


class _Nvml:
    """Two GPUs joined by 18 NVLinks; NVML cannot answer P2P for 1 -> 0."""

    class NVMLError(Exception):
        pass

    NVML_NVLINK_MAX_LINKS = 36
    BUSES = ("00000000:18:00.0", "00000000:2A:00.0")

    def __init__(self, *, through_switch: bool = False) -> None:
        self.p2p_indices: list[Any] = []
        self.through_switch = through_switch

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetPciInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(busId=self.BUSES[handle].encode())

    def nvmlDeviceGetNvLinkState(self, handle: int, link: int) -> int:
        if link >= 18:
            raise self.NVMLError("invalid argument")
        return 1

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: int, link: int) -> SimpleNamespace:
        # What NVML 580 answered on the project's 2x H200 (HGX, NVSwitch) for every link.
        bus = "FFFFFFFF:FF:FF.0" if self.through_switch else self.BUSES[1 - handle]
        return SimpleNamespace(busId=bus)

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: int, link: int) -> int:
        return 2 if self.through_switch else 0  # NVML_NVLINK_DEVICE_TYPE_SWITCH / _GPU

    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:
        return SYSTEM

    def nvmlDeviceGetP2PStatus(self, a: int, b: int, index: Any) -> int:
        self.p2p_indices.append(index)
        if a == 1:
            raise self.NVMLError("not supported")
        return 0


@pytest.mark.parametrize("through_switch", [False, True])
def test_gpu_topology_from_nvml(through_switch: bool) -> None:
    nvml = _Nvml(through_switch=through_switch)
    topo = gpu_topology(nvml)
    assert topo.matrix == [["X", "NV18"], ["NV18", "X"]]
    # 0 -> 1 answered by NVML; 1 -> 0 unanswered and no CUDA here: False, not a crash.
    assert topo.p2p == [[False, True], [False, False]]
    assert nvml.p2p_indices == [0, 0]  # plain ints, not pynvml's (0,) tuple
