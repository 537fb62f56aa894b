"""Doctor's NUMA/CPU and PCIe checks against fake sysfs/proc trees and a stand-in lspci."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from clusterbench.doctor import Sources, numa_cpu, pcie
from clusterbench.hardware.specs import match_spec, to_spec_ref
from clusterbench.schema import CpuInfo, GpuInfo, HostInfo, NicInfo, PCIeLink

H200_MEMORY_BYTES = 143771 * 2**20
H200_SPEC = to_spec_ref(match_spec("NVIDIA H200", H200_MEMORY_BYTES))  # type: ignore[arg-type]
GPU_BUS = "0000:03:00.0"
NIC_BUS = "0000:04:00.0"
FAR_GPU_BUS = "0000:83:00.0"


def _write(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content + "\n", encoding="utf-8")


def _pci(root: Path, chain: Sequence[str]) -> None:
    """A device below bridges: sys/devices/pci0000:00/<root port>/.../<device>."""
    device = root.joinpath("sys/devices/pci0000:00", *chain)
    device.mkdir(parents=True)
    link = root / "sys/bus/pci/devices" / chain[-1]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(device)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    _write(tmp_path / "sys/devices/system/node/node0/cpulist", "0-31")
    _write(tmp_path / "sys/devices/system/node/node1/cpulist", "32-63")
    # GPU and NIC below one PCIe switch (01:00.0 up, 02:00.0 / 02:01.0 down) on root port 00:01.0
    _pci(tmp_path, ["0000:00:01.0", "0000:01:00.0", "0000:02:00.0", GPU_BUS])
    _pci(tmp_path, ["0000:00:01.0", "0000:01:00.0", "0000:02:01.0", NIC_BUS])
    _pci(tmp_path, ["0000:80:01.0", FAR_GPU_BUS])
    return tmp_path


def _gpu(index: int, *, numa: int, bus: str, **kw: Any) -> GpuInfo:
    return GpuInfo(
        index=index,
        name="NVIDIA H200",
        numa_node=numa,
        pci_bus_id=bus,
        spec=H200_SPEC,
        pcie=kw.pop("pcie", PCIeLink(gen=5, width=16, max_gen=5, max_width=16)),
        **kw,
    )


def _host(*, cores: int = 128, gpus: list[GpuInfo] | None = None, **kw: Any) -> HostInfo:
    if gpus is None:
        gpus = [_gpu(0, numa=0, bus=GPU_BUS), _gpu(1, numa=1, bus=FAR_GPU_BUS)]
    return HostInfo(hostname="n0", gpus=gpus, cpu=CpuInfo(cores=cores, threads=2 * cores), **kw)


def _src(root: Path, **kw: Any) -> Sources:
    return Sources(host=kw.pop("host", None) or _host(), root=root, **kw)


# ---------------------------------------------------------------------------- NUMA and CPU


def test_affinity_on_the_wrong_node(root: Path) -> None:
    node1 = frozenset(range(32, 64))
    src = _src(root, rank_affinity={0: node1, 1: node1})
    [found] = numa_cpu.check_affinity(src)
    assert (found.id, found.severity, found.scope) == (
        "doctor.numa.affinity",
        "warn",
        "host:n0/cuda:0",
    )
    assert found.evidence["affinity"] == "32-63" and found.evidence["numa_nodes_used"] == [1]
    assert "numactl --cpunodebind=0 --membind=0" in found.fix


def test_unpinned_rank_spans_both_nodes_and_outside_runs_nothing(root: Path) -> None:
    src = _src(root, rank_affinity={0: frozenset(range(64)), 1: frozenset(range(32, 64))})
    [found] = numa_cpu.check_affinity(src)
    assert found.evidence["numa_nodes_used"] == [0, 1] and "also on" in found.message
    assert numa_cpu.check_affinity(_src(root)) == []  # doctor CLI: no workers


@pytest.mark.parametrize(("value", "count"), [("1", 1), ("0", 0)])
def test_numa_balancing(root: Path, value: str, count: int) -> None:
    _write(root / "proc/sys/kernel/numa_balancing", value)
    found = numa_cpu.check_numa_balancing(_src(root))
    assert len(found) == count
    if found:
        assert found[0].severity == "warn" and found[0].fix == "sysctl -w kernel.numa_balancing=0"


def test_governor_powersave(root: Path) -> None:
    for cpu, governor in enumerate(["powersave", "powersave", "performance"]):
        _write(root / f"sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor", governor)
    [found] = numa_cpu.check_governor(_src(root))
    assert found.evidence["scaling_governor"] == {"performance": 1, "powersave": 2}
    assert "2 CPUs powersave" in found.message and "cpupower" in found.fix


def test_governor_performance_or_absent_is_quiet(root: Path) -> None:
    assert numa_cpu.check_governor(_src(root)) == []  # VMs have no cpufreq
    _write(root / "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "performance")
    assert numa_cpu.check_governor(_src(root)) == []


@pytest.mark.parametrize(
    ("env", "severity"),
    [({}, "info"), ({"OMP_NUM_THREADS": "1"}, "warn"), ({"OMP_NUM_THREADS": "16"}, None)],
)
def test_omp_threads_with_64_cores_per_gpu(
    root: Path, env: dict[str, str], severity: str | None
) -> None:
    found = numa_cpu.check_omp_threads(_src(root, env=env))
    assert [f.severity for f in found] == ([severity] if severity else [])
    if found:
        assert found[0].evidence["cores_per_gpu"] == 64 and "OMP_NUM_THREADS=32" in found[0].fix


def test_too_few_cores_per_gpu(root: Path) -> None:
    [found] = numa_cpu.check_cores_per_gpu(_src(root, host=_host(cores=6)))
    assert found.id == "doctor.cpu.cores_per_gpu" and "3 CPU cores per GPU" in found.message
    assert numa_cpu.check_cores_per_gpu(_src(root)) == []


def test_format_cpulist() -> None:
    assert numa_cpu.format_cpulist([8, 0, 1, 2, 3]) == "0-3,8"


# ---------------------------------------------------------------------------- PCIe


def test_link_gen4_of_max5_is_info_read_at_idle(root: Path) -> None:
    low = _gpu(0, numa=0, bus=GPU_BUS, pcie=PCIeLink(gen=4, width=16, max_gen=5, max_width=16))
    [found] = pcie.check_pcie_link(_src(root, host=_host(gpus=[low])))
    assert (found.id, found.severity) == ("doctor.pcie.link_below_max", "info")
    assert "read at idle" in found.message and found.evidence["gen"] == 4


def test_slot_limited_below_the_sku(root: Path) -> None:
    slot = _gpu(0, numa=0, bus=GPU_BUS, pcie=PCIeLink(gen=4, width=16, max_gen=4, max_width=16))
    [found] = pcie.check_pcie_link(_src(root, host=_host(gpus=[slot])))
    assert (found.id, found.severity) == ("doctor.pcie.slot_limited", "warn")
    assert pcie.check_pcie_link(_src(root)) == []


LSPCI = """\
0000:00:1c.0 PCI bridge: Intel Corporation Device 7aba (rev 11) (prog-if 00 [Normal decode])
\tCapabilities: [220 v1] Access Control Services
\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
0000:02:00.0 PCI bridge: Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0)
\tCapabilities: [1f8 v1] Access Control Services
\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl+ DirectTrans+
\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
0000:02:01.0 PCI bridge: Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0)
\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-
0000:03:00.0 3D controller: NVIDIA Corporation GH100 [H200 SXM 141GB] (rev a1)
"""


def test_acs_enabled_on_the_switch_above_a_gpu(root: Path) -> None:
    calls: list[Sequence[str]] = []

    def run(cmd: Sequence[str]) -> str:
        calls.append(cmd)
        return LSPCI

    assert set(pcie.parse_acs_enabled(LSPCI)) == {"0000:00:1c.0", "0000:02:00.0"}
    [found] = pcie.check_acs(_src(root, run=run))
    assert calls == [["lspci", "-D", "-vvv"]]
    assert (found.id, found.severity) == ("doctor.pcie.acs", "warn")
    assert list(found.evidence["bridges"]) == ["0000:02:00.0"]  # 00:1c.0 is above nothing of ours
    assert "setpci -s 0000:02:00.0 ECAP_ACS+0x6.w=0000" in found.fix


def test_acs_without_lspci_or_capabilities_says_nothing(root: Path) -> None:
    assert pcie.check_acs(_src(root, run=lambda cmd: None)) == []
    denied = "0000:02:00.0 PCI bridge: Broadcom\n\tCapabilities: <access denied>\n"
    assert pcie.check_acs(_src(root, run=lambda cmd: denied)) == []


def test_gpu_nic_distance(root: Path) -> None:
    nic = NicInfo(name="mlx5_0", kind="infiniband", numa_node=0, pci_bus_id=NIC_BUS, port=1)
    [found] = pcie.check_gpu_nic_distance(_src(root, host=_host(nics=[nic])))
    assert found.severity == "info"
    assert found.evidence["nearest"] == {
        "0": {"nic": "mlx5_0", "distance": "same PCIe switch"},
        "1": {"nic": "mlx5_0", "distance": "across sockets"},
    }
    assert found.evidence["across_sockets"] == ["1"]
    assert pcie.check_gpu_nic_distance(_src(root)) == []  # no RDMA NIC


def test_numa_balancing_is_moot_on_one_node(tmp_path: Path) -> None:
    _write(tmp_path / "sys/devices/system/node/node0/cpulist", "0-31")
    _write(tmp_path / "proc/sys/kernel/numa_balancing", "1")
    assert numa_cpu.check_numa_balancing(_src(tmp_path)) == []
