"""``render_host_info`` writes every part of the inventory."""

from __future__ import annotations

import io

from rich.console import Console

from clusterbench.hardware.specs import match_spec, to_spec_ref
from clusterbench.report.info import UNKNOWN_SKU, render_host_info
from clusterbench.schema import CpuInfo, GpuInfo, HostInfo, NicInfo, PCIeLink, Topology


def _host() -> HostInfo:
    spec = match_spec("NVIDIA H200")
    assert spec is not None
    h200 = GpuInfo(
        index=0,
        name="NVIDIA H200",
        pci_bus_id="0000:18:00.0",
        memory_bytes=143771 * 2**20,
        numa_node=0,
        pcie=PCIeLink(gen=5, width=16, max_gen=5, max_width=16),
        spec=to_spec_ref(spec),
        nvlink_active=18,
    )
    odd = GpuInfo(
        index=1,
        name="NVIDIA H200 NVL",
        pcie=PCIeLink(gen=1, width=16, max_gen=5, max_width=16),
    )
    return HostInfo(
        hostname="node-[7]",
        gpus=[h200, odd],
        cpu=CpuInfo(
            model="Fake EPYC 9999",
            sockets=2,
            cores=64,
            threads=128,
            numa_nodes={"0": "0-31,64-95", "1": "32-63,96-127"},
        ),
        nics=[
            NicInfo(
                name="mlx5_0",
                kind="infiniband",
                state="ACTIVE",
                rate_gbps=400.0,
                numa_node=0,
                port=1,
            ),
            NicInfo(name="eth0", kind="ethernet", state="up", rate_gbps=None),
        ],
        versions={"torch": "2.11.0", "nccl": "2.28.3", "driver": "570.86.15"},
        topology=Topology(
            devices=["GPU0", "GPU1"],
            matrix=[["X", "NV18"], ["NV18", "X"]],
            p2p=[[False, True], [True, False]],
        ),
    )


def _render(host: HostInfo) -> str:
    buffer = io.StringIO()
    render_host_info(host, Console(file=buffer, width=200, color_system=None))
    return buffer.getvalue()


def test_render_shows_every_section() -> None:
    out = _render(_host())
    assert "node-[7]" in out  # not eaten as rich markup
    for text in (
        "NVIDIA H200",
        "140.4",  # GiB
        "0000:18:00.0",
        "Gen5 x16 (max Gen5 x16)",
        "Gen1 x16 (max Gen5 x16)",
        "H200 SXM",
        UNKNOWN_SKU,
        "NV18",
        "Legend",
        "Fake EPYC 9999",
        "2 / 64 / 128",
        "0-31,64-95",
        "mlx5_0",
        "infiniband",
        "ACTIVE",
        "400",
        "570.86.15",
        "2.28.3",
    ):
        assert text in out, text


def test_render_without_gpus_or_nics() -> None:
    out = _render(HostInfo(hostname="cpu-box"))
    assert "GPUs: none found" in out
    assert "NICs: none found" in out
    assert "GPU topology" not in out
