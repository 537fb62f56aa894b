"""The host probe against a fake sysfs/proc tree and a stand-in NVML."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest
import torch

from clusterbench.hardware.probe import (
    numa_node_cpus,
    parse_cpulist,
    probe_cpu,
    probe_gpus,
    probe_host,
    probe_nics,
    probe_versions,
    read_pcie_link,
    sysfs_pcie_link,
)
from clusterbench.schema import HostInfo, PCIeLink

H200_MEMORY_BYTES = 143771 * 2**20  # what nvidia-smi shows on an H200


# ---------------------------------------------------------------------------- fake trees


def _write(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content + "\n", encoding="utf-8")


def _pci_device(root: Path, bus: str, files: dict[str, str]) -> Path:
    device = root / "sys/devices/pci0000:00" / bus
    for name, content in files.items():
        _write(device / name, content)
    link = root / "sys/bus/pci/devices" / bus
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(device)
    return device


def _link(path: Path, target: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


def _rdma(root: Path, name: str, *, device: Path, port: dict[str, str]) -> None:
    dev = root / "sys/class/infiniband" / name
    _link(dev / "device", device)
    for key, value in port.items():
        _write(dev / "ports/1" / key, value)


def _net(root: Path, name: str, *, device: Path | None, files: dict[str, str]) -> None:
    iface = root / "sys/class/net" / name
    for key, value in files.items():
        _write(iface / key, value)
    if device is not None:
        _link(iface / "device", device)


def _cpu_tree(root: Path) -> None:
    blocks = [
        f"processor\t: {cpu}\nmodel name\t: Fake EPYC 9999\nphysical id\t: {cpu // 2}\n"
        for cpu in range(4)
    ]
    _write(root / "proc/cpuinfo", "\n".join(blocks))
    _write(root / "sys/devices/system/node/node0/cpulist", "0-1")
    _write(root / "sys/devices/system/node/node1/cpulist", "2-3")
    _write(root / "sys/devices/system/node/online", "0-1")  # not a node directory


def _gpu_tree(root: Path) -> None:
    link = {"max_link_speed": "32.0 GT/s PCIe", "max_link_width": "16"}
    _pci_device(
        root,
        "0000:18:00.0",
        {"numa_node": "0", "current_link_speed": "32.0 GT/s PCIe", "current_link_width": "16"}
        | link,
    )
    # An idle GPU down-trained to Gen1 x16, on NUMA node 1.
    _pci_device(
        root,
        "0000:9a:00.0",
        {"numa_node": "1", "current_link_speed": "2.5 GT/s PCIe", "current_link_width": "16"}
        | link,
    )


def _nic_tree(root: Path) -> None:
    ib = _pci_device(root, "0000:3b:00.0", {"numa_node": "0"})
    roce = _pci_device(root, "0000:5e:00.0", {"numa_node": "-1"})
    efa = _pci_device(root, "0000:10:1c.0", {"numa_node": "0"})
    _link(efa / "driver", root / "sys/bus/pci/drivers/efa")
    eth = _pci_device(root, "0000:5e:00.1", {"numa_node": "1"})
    virtio = root / "sys/devices/pci0000:00/0000:00:03.0/virtio2"
    virtio.mkdir(parents=True)
    active = {"state": "4: ACTIVE", "link_layer": "InfiniBand"}
    _rdma(root, "mlx5_0", device=ib, port=active | {"rate": "400 Gb/sec (4X NDR)"})
    roce_port = {"state": "1: DOWN", "rate": "100 Gb/sec (2X HDR)", "link_layer": "Ethernet"}
    _rdma(root, "mlx5_1", device=roce, port=roce_port)
    efa_port = {"state": "4: ACTIVE", "rate": "100 Gb/sec", "link_layer": "Unspecified"}
    _rdma(root, "rdmap16s28", device=efa, port=efa_port)
    _net(root, "lo", device=None, files={"operstate": "unknown", "type": "772"})
    _net(root, "docker0", device=None, files={"operstate": "up", "type": "1"})
    _net(root, "eth0", device=eth, files={"operstate": "up", "speed": "25000", "type": "1"})
    _net(root, "ens3", device=virtio, files={"operstate": "up", "speed": "-1", "type": "1"})
    _net(root, "ib0", device=ib, files={"operstate": "up", "type": "32"})


@pytest.fixture
def root(tmp_path: Path) -> Path:
    _cpu_tree(tmp_path)
    _gpu_tree(tmp_path)
    _nic_tree(tmp_path)
    return tmp_path


# ---------------------------------------------------------------------------- stand-in NVML


class FakeNvml:
    """Two H200s joined by 18 NVLinks, PCIe Gen5 x16; GPU 1's max link width query fails."""

    class NVMLError(Exception):
        pass

    NVML_NVLINK_MAX_LINKS = 36  # NVML 12.8+; an H200 has 18, so the loop must stop on error
    BUSES = ("00000000:18:00.0", "00000000:9A:00.0")

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvml"):
            object.__getattribute__(self, "calls").append(name)
        return object.__getattribute__(self, name)

    def nvmlShutdown(self) -> None:
        raise AssertionError("a caller-owned NVML must not be shut down")

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimpleNamespace:
        return SimpleNamespace(index=index)

    def nvmlDeviceGetName(self, h: SimpleNamespace) -> str | bytes:
        return b"NVIDIA H200" if h.index else "NVIDIA H200"  # old bindings return bytes

    def nvmlDeviceGetUUID(self, h: SimpleNamespace) -> str:
        return f"GPU-0000000{h.index}"

    def nvmlDeviceGetPciInfo(self, h: SimpleNamespace) -> SimpleNamespace:
        return SimpleNamespace(busId=self.BUSES[h.index])

    def nvmlDeviceGetMemoryInfo(self, h: SimpleNamespace) -> SimpleNamespace:
        return SimpleNamespace(total=H200_MEMORY_BYTES, used=0, free=H200_MEMORY_BYTES)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: SimpleNamespace) -> int:
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: SimpleNamespace) -> int:
        return 16

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: SimpleNamespace) -> int:
        return 5

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: SimpleNamespace) -> int:
        if h.index == 1:
            raise self.NVMLError("Unknown Error")
        return 16

    def nvmlDeviceGetNvLinkState(self, h: SimpleNamespace, link: int) -> int:
        if link >= 18:
            raise self.NVMLError("Invalid Argument")
        return 1  # NVML_FEATURE_ENABLED

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: SimpleNamespace, link: int) -> SimpleNamespace:
        return SimpleNamespace(busId=self.BUSES[1 - h.index])

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: SimpleNamespace, link: int) -> int:
        return 0  # NVML_NVLINK_DEVICE_TYPE_GPU

    def nvmlDeviceGetTopologyCommonAncestor(self, a: SimpleNamespace, b: SimpleNamespace) -> int:
        return 50  # NVML_TOPOLOGY_SYSTEM

    def nvmlDeviceGetP2PStatus(self, a: SimpleNamespace, b: SimpleNamespace, index: int) -> int:
        return 0  # NVML_P2P_STATUS_OK

    def nvmlSystemGetDriverVersion(self) -> str:
        return "570.86.15"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12080


# ---------------------------------------------------------------------------- CPU


@pytest.mark.parametrize(
    ("cpulist", "cpus"),
    [("0-3,8", [0, 1, 2, 3, 8]), ("5", [5]), ("", []), ("0-1,4-5\n", [0, 1, 4, 5])],
)
def test_parse_cpulist(cpulist: str, cpus: list[int]) -> None:
    assert parse_cpulist(cpulist) == cpus


def test_parse_cpulist_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="cpulist"):
        parse_cpulist("0-x")


def test_cpu_from_fake_tree(root: Path) -> None:
    cpu = probe_cpu(root)
    assert cpu.model == "Fake EPYC 9999"
    assert cpu.sockets == 2
    assert cpu.numa_nodes == {"0": "0-1", "1": "2-3"}
    assert cpu.threads == psutil.cpu_count(logical=True)
    assert numa_node_cpus(root) == {0: [0, 1], 1: [2, 3]}


# ---------------------------------------------------------------------------- NICs


def test_nics_from_fake_tree(root: Path) -> None:
    nics = {nic.name: nic for nic in probe_nics(root)}
    assert set(nics) == {"mlx5_0", "mlx5_1", "rdmap16s28", "eth0", "ens3", "ib0"}
    ib = nics["mlx5_0"]
    assert (ib.kind, ib.state, ib.rate_gbps, ib.port) == ("infiniband", "ACTIVE", 400.0, 1)
    assert (ib.numa_node, ib.pci_bus_id) == (0, "0000:3b:00.0")
    roce = nics["mlx5_1"]
    assert (roce.kind, roce.state, roce.rate_gbps, roce.numa_node) == ("roce", "DOWN", 100.0, None)
    assert nics["rdmap16s28"].kind == "efa"  # found by its driver, not its name
    eth = nics["eth0"]
    assert (eth.kind, eth.state, eth.rate_gbps, eth.numa_node) == ("ethernet", "up", 25.0, 1)
    assert nics["ens3"].rate_gbps is None  # speed -1
    assert nics["ens3"].pci_bus_id == "0000:00:03.0"  # the virtio device's PCI parent
    assert nics["ib0"].kind == "other"  # IPoIB


# ---------------------------------------------------------------------------- GPUs


def test_sysfs_pcie_link(root: Path) -> None:
    assert sysfs_pcie_link(root, "0000:18:00.0") == PCIeLink(
        gen=5, width=16, max_gen=5, max_width=16
    )
    assert sysfs_pcie_link(root, "0000:9a:00.0").gen == 1
    assert sysfs_pcie_link(root, "0000:ff:00.0") == PCIeLink()


def test_gpus_from_nvml(root: Path) -> None:
    gpus = probe_gpus(FakeNvml(), root=root)
    assert [g.name for g in gpus] == ["NVIDIA H200", "NVIDIA H200"]
    assert [g.pci_bus_id for g in gpus] == ["0000:18:00.0", "0000:9a:00.0"]
    assert [g.numa_node for g in gpus] == [0, 1]
    assert gpus[0].uuid == "GPU-00000000"
    assert gpus[0].memory_bytes == H200_MEMORY_BYTES
    assert gpus[0].pcie == PCIeLink(gen=5, width=16, max_gen=5, max_width=16)
    assert gpus[1].pcie == PCIeLink(gen=5, width=16, max_gen=5, max_width=None)  # query failed
    assert [g.nvlink_active for g in gpus] == [18, 18]
    assert gpus[0].spec is not None and gpus[0].spec.sku == "H200 SXM"


def test_gpus_from_torch_and_sysfs(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    props = SimpleNamespace(
        name="NVIDIA H100 80GB HBM3",
        total_memory=81559 * 2**20,
        pci_bus_id=0x9A,
        pci_domain_id=0,
        pci_device_id=0,
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    (gpu,) = probe_gpus(None, root=root)
    assert gpu.pci_bus_id == "0000:9a:00.0"
    assert gpu.numa_node == 1
    assert gpu.pcie == PCIeLink(gen=1, width=16, max_gen=5, max_width=16)
    assert gpu.spec is not None and gpu.spec.sku == "H100 SXM"
    assert read_pcie_link(0, nvml=None, root=root) == gpu.pcie


def test_no_gpu_without_nvml_or_cuda(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert probe_gpus(None, root=root) == []


def test_read_pcie_link_through_nvml() -> None:
    assert read_pcie_link(1, nvml=FakeNvml()) == PCIeLink(gen=5, width=16, max_gen=5)


# ---------------------------------------------------------------------------- host


def _forbid_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("the probe touched CUDA although NVML was there")

    for name in ("_lazy_init", "get_device_properties", "can_device_access_peer", "init"):
        monkeypatch.setattr(torch.cuda, name, boom)


def test_probe_host_with_nvml(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _forbid_cuda(monkeypatch)
    nvml = FakeNvml()
    host = probe_host(root=root, nvml=nvml)
    assert len(host.gpus) == 2
    assert host.topology.devices == ["GPU0", "GPU1"]
    assert host.topology.matrix == [["X", "NV18"], ["NV18", "X"]]
    assert host.topology.p2p == [[False, True], [True, False]]
    assert host.versions["driver"] == "570.86.15"
    assert host.versions["nvml_cuda"] == "12.8"
    assert host.cpu.numa_nodes == {"0": "0-1", "1": "2-3"}
    assert any(n.rate_gbps == 400.0 for n in host.nics)
    assert "nvmlShutdown" not in nvml.calls
    HostInfo.model_validate_json(host.model_dump_json())  # round-trips through results.json


def test_versions_without_nvml() -> None:
    versions = probe_versions(None)
    assert versions["torch"] == str(torch.__version__)
    assert versions["python"].count(".") == 2
    assert "driver" not in versions
    assert versions["clusterbench"]


def test_probe_this_machine() -> None:
    host = probe_host()
    assert host.hostname == os.uname().nodename
    assert host.cpu.threads is not None and host.cpu.threads > 0
    assert host.cpu.numa_nodes or not Path("/sys/devices/system/node/node0").exists()


def test_torch_versions_read_from_its_files_equal_the_imported_ones() -> None:
    """doctor --fast reads torch's version from torch/version.py instead of importing torch
    (seconds); it must state what the import does, less NCCL's."""
    from clusterbench.hardware.probe import _torch_versions, _torch_versions_unimported

    read = _torch_versions_unimported()
    assert read["torch"]
    assert read == {k: v for k, v in _torch_versions().items() if k != "nccl"}
