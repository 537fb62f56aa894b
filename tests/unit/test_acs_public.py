"""`lspci -vvv` outputs of GPU servers that others published (tests/data/lspci, each file's
source in its README), read by doctor's ACS check; which bridges have ACS source validation
on, and where they sit, is what each file itself prints (its ``ACSCtl:`` lines and its
``Bus: primary=.., secondary=..`` lines or ``lspci -tv`` tree)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from clusterbench.doctor import Sources, pcie
from clusterbench.schema import GpuInfo, HostInfo, NicInfo

LSPCI = Path(__file__).resolve().parents[1] / "data" / "lspci"
H100 = "h100_sxm_8gpu_dell_lspci_vvv.txt"
MI100 = "mi100_amd_gpp_bridge_acs_excerpt.txt"


def _text(name: str) -> str:
    return (LSPCI / name).read_text(encoding="utf-8")


def _sysfs(root: Path, chain: Sequence[str]) -> None:
    """A device below its bridges, as sysfs links it: sys/devices/pciDDDD:BB/<port>/.../<dev>."""
    device = root.joinpath("sys/devices", f"pci{chain[0][:7]}", *chain)
    device.mkdir(parents=True)
    link = root / "sys/bus/pci/devices" / chain[-1]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(device)


def _src(root: Path, text: str, gpus: Sequence[str], nic: str) -> Sources:
    host = HostInfo(
        hostname="n0",
        gpus=[GpuInfo(index=i, name="GPU", pci_bus_id=b) for i, b in enumerate(gpus)],
        nics=[NicInfo(name="mlx5_0", kind="infiniband", pci_bus_id=nic, port=1)],
    )
    return Sources(host=host, root=root, run=lambda cmd: text)


def test_h100_server_acs_on_root_ports_and_nvswitch_ports_only() -> None:
    """Eight H100 SXM (10de:2330) behind Broadcom PEX890xx switches, four NVSwitches (22a3)
    behind a PMC-Sierra switch: 55 ACSCtl lines, SrcValid+ on two Intel root ports (00:0c.0,
    00:0e.0) and the four PMC-Sierra downstream ports (82:00.0-82:03.0), SrcValid- on every
    PEX890xx port, every Intel 352a root port and the ConnectX-6 Dx functions."""
    text = _text(H100)
    assert text.count("ACSCtl:") == 55 and text.count("3D controller: NVIDIA") == 8
    enabled = pcie.parse_acs_enabled(text)
    assert sorted(enabled) == ["0000:00:0c.0", "0000:00:0e.0", "0000:82:00.0", "0000:82:01.0",
                               "0000:82:02.0", "0000:82:03.0"]  # fmt: skip
    pmc = "PCI bridge: PMC-Sierra Inc. Device 4128 (prog-if 00 [Normal decode])"
    assert enabled["0000:82:00.0"] == pmc
    assert enabled["0000:00:0c.0"].startswith("PCI bridge: Intel Corporation Device 1bbc")
    for off in ("0000:17:01.0", "0000:99:1f.0", "0000:15:01.0", "0000:81:00.0", "0000:1b:00.0"):
        assert off not in enabled  # SrcValid- printed
    assert "0000:16:00.0" not in enabled  # the switch's upstream port prints no ACS at all


def test_h100_server_gpu_and_nic_below_switch_ports_with_acs_off(tmp_path: Path) -> None:
    """GPU 19:00.0 and ConnectX-7 1a:00.0 sit below root port 15:01.0 (secondary=16), the
    PEX890xx upstream port 16:00.0 (secondary=17) and its ports 17:01.0 (secondary=19) and
    17:02.0 (secondary=1a), all without source validation: nothing to report."""
    _sysfs(tmp_path, ["0000:15:01.0", "0000:16:00.0", "0000:17:01.0", "0000:19:00.0"])
    _sysfs(tmp_path, ["0000:15:01.0", "0000:16:00.0", "0000:17:02.0", "0000:1a:00.0"])
    assert pcie.check_acs(_src(tmp_path, _text(H100), ["0000:19:00.0"], "0000:1a:00.0")) == []


def test_h100_server_acs_above_an_nvswitch_port_would_be_named(tmp_path: Path) -> None:
    """Below 80:01.0 (secondary=81), 81:00.0 (secondary=82) and 82:00.0 (secondary=83) sits the
    NVSwitch 83:00.0; only an inventory device there makes the check name 82:00.0 — the check
    looks above GPUs and RDMA NICs, so an RDMA NIC placed there by this test stands in."""
    _sysfs(tmp_path, ["0000:15:01.0", "0000:16:00.0", "0000:17:01.0", "0000:19:00.0"])
    _sysfs(tmp_path, ["0000:80:01.0", "0000:81:00.0", "0000:82:00.0", "0000:83:00.0"])
    [found] = pcie.check_acs(_src(tmp_path, _text(H100), ["0000:19:00.0"], "0000:83:00.0"))
    assert list(found.evidence["bridges"]) == ["0000:82:00.0"]
    assert "setpci -s 0000:82:00.0 ECAP_ACS+0x6.w=0000" in found.fix


def test_mi100_server_gpp_bridge_with_acs_above_gpus_and_nic(tmp_path: Path) -> None:
    """The author's excerpt of 40:01.1 (AMD Starship/Matisse GPP Bridge, NUMA node 1,
    ACSCtl SrcValid+), address without domain, '....' where lines were left out, then the
    `lspci -tv` subtree: MI100 (1002:738c) 4a:00.0 and ConnectX-6 45:00.0 below it."""
    text = _text(MI100)
    enabled = pcie.parse_acs_enabled(text)
    assert enabled == {"0000:40:01.1": "PCI bridge: Advanced Micro Devices, Inc. [AMD] "
                       "Starship/Matisse GPP Bridge (prog-if 00 [Normal decode])"}  # fmt: skip
    gpu = ["0000:40:01.1", "0000:43:00.0", "0000:44:01.0", "0000:46:00.0", "0000:47:00.0",
           "0000:48:00.0", "0000:49:00.0", "0000:4a:00.0"]  # fmt: skip
    _sysfs(tmp_path, gpu)
    _sysfs(tmp_path, ["0000:40:01.1", "0000:43:00.0", "0000:44:00.0", "0000:45:00.0"])
    [found] = pcie.check_acs(_src(tmp_path, text, ["0000:4a:00.0"], "0000:45:00.0"))
    assert (found.id, found.severity) == ("doctor.pcie.acs", "warn")
    assert found.evidence["bridges"] == enabled
