"""``clusterbench info``: the host inventory as rich tables."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from clusterbench.schema import CpuInfo, GpuInfo, HostInfo, NicInfo, PCIeLink, Topology

__all__ = ["UNKNOWN_SKU", "render_host_info"]

UNKNOWN_SKU = "unknown SKU: compared with peers only"
_NONE = "-"
# Meaning of each matrix label, as `nvidia-smi topo -m` explains them.
_TOPOLOGY_LEGEND: tuple[tuple[str, str], ...] = (
    ("X", "self"),
    ("NV#", "bonded set of # NVLinks (direct or through NVSwitch)"),
    ("PIX", "at most one PCIe bridge"),
    ("PXB", "several PCIe bridges, no host bridge"),
    ("PHB", "a PCIe host bridge (typically the CPU)"),
    ("NODE", "PCIe and the interconnect between host bridges of one NUMA node"),
    ("SYS", "PCIe and the interconnect between NUMA nodes (QPI/UPI, xGMI)"),
    ("?", "unknown"),
)


def _or_none(value: object) -> str:
    return _NONE if value is None else str(value)


def _pcie_text(link: PCIeLink) -> str:
    def one(gen: int | None, width: int | None) -> str:
        return f"Gen{_or_none(gen)} x{_or_none(width)}"

    if link.gen is None and link.width is None and link.max_gen is None:
        return _NONE
    return f"{one(link.gen, link.width)} (max {one(link.max_gen, link.max_width)})"


def _memory_gib(gpu: GpuInfo) -> str:
    return _NONE if gpu.memory_bytes is None else f"{gpu.memory_bytes / 2**30:.1f}"


def _gpu_table(gpus: list[GpuInfo]) -> Table:
    table = Table(title="GPUs")
    for column in ("GPU", "name", "memory GiB", "PCI bus", "NUMA", "PCIe", "NVLinks", "spec"):
        table.add_column(column)
    for gpu in gpus:
        table.add_row(
            str(gpu.index),
            gpu.name,
            _memory_gib(gpu),
            _or_none(gpu.pci_bus_id),
            _or_none(gpu.numa_node),
            _pcie_text(gpu.pcie),
            _or_none(gpu.nvlink_active),
            gpu.spec.sku if gpu.spec is not None else UNKNOWN_SKU,
        )
    return table


def _topology_table(topology: Topology) -> Table:
    table = Table(title="GPU topology")
    table.add_column("")
    for device in topology.devices:
        table.add_column(device)
    table.add_column("P2P read to")
    for i, (device, row) in enumerate(zip(topology.devices, topology.matrix, strict=True)):
        p2p_row = topology.p2p[i] if i < len(topology.p2p) else []
        peers = [topology.devices[j] for j, ok in enumerate(p2p_row) if ok and j != i]
        table.add_row(device, *row, ", ".join(peers) or _NONE)
    return table


def _legend_text() -> str:
    return "Legend: " + "; ".join(f"{label} = {meaning}" for label, meaning in _TOPOLOGY_LEGEND)


def _cpu_table(cpu: CpuInfo) -> Table:
    table = Table(title="CPU")
    table.add_column("field")
    table.add_column("value")
    table.add_row("model", _or_none(cpu.model))
    counts = (cpu.sockets, cpu.cores, cpu.threads)
    table.add_row("sockets / cores / threads", " / ".join(_or_none(n) for n in counts))
    for node, cpus in cpu.numa_nodes.items():
        table.add_row(f"NUMA node {node}", cpus)
    return table


def _nic_table(nics: list[NicInfo]) -> Table:
    table = Table(title="NICs")
    for column in ("name", "port", "kind", "state", "rate Gb/s", "NUMA", "PCI bus"):
        table.add_column(column)
    for nic in nics:
        rate = _NONE if nic.rate_gbps is None else f"{nic.rate_gbps:g}"
        table.add_row(
            nic.name,
            _or_none(nic.port),
            nic.kind,
            _or_none(nic.state),
            rate,
            _or_none(nic.numa_node),
            _or_none(nic.pci_bus_id),
        )
    return table


def _versions_table(versions: dict[str, str]) -> Table:
    table = Table(title="Versions")
    table.add_column("component")
    table.add_column("version")
    for name, version in versions.items():
        table.add_row(name, version)
    return table


def render_host_info(host: HostInfo, console: Console) -> None:
    """Print one host's GPUs, topology, CPU, NICs and versions."""
    console.print(f"[bold]Host[/bold] {escape(host.hostname)}")
    if host.gpus:
        console.print(_gpu_table(host.gpus))
    else:
        console.print("GPUs: none found")
    if host.topology.devices:
        console.print(_topology_table(host.topology))
        console.print(_legend_text(), highlight=False)
    console.print(_cpu_table(host.cpu))
    if host.nics:
        console.print(_nic_table(host.nics))
    else:
        console.print("NICs: none found")
    console.print(_versions_table(host.versions))
