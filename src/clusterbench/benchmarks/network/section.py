"""The network part of the summary: NIC rates and loopback results as rows, and host x host
matrices (rows: sender, columns: receiver) of TCP throughput, TCP latency and RDMA bandwidth.
"""

from __future__ import annotations

from collections.abc import Iterable

from clusterbench.benchmarks.network import NetworkMetrics
from clusterbench.metrics import direction_of
from clusterbench.schema import Measurement
from clusterbench.views.cells import Matrix, Section, metric_rows

__all__ = ["network_matrices", "network_row_label", "section"]

_CORNER = "sender \\ receiver"
_LOOPBACK_LABELS = {
    NetworkMetrics.tcp_throughput.name: "loopback TCP throughput",
    NetworkMetrics.tcp_latency_us.name: "loopback TCP latency (round trip)",
}


def section(ms: list[Measurement], multi_host: bool) -> Section:
    rows = metric_rows(ms, label=network_row_label, multi_host=multi_host)
    return Section("network", rows=rows, matrices=network_matrices(ms))


def network_row_label(m: Measurement) -> str | None:
    """Summary rows: each NIC's rate and state, and the single-node (loopback) tests; results
    between nodes go to :func:`network_matrices`."""
    if NetworkMetrics.nic_rate.matches(m):
        return f"nic {m.params.get('nic')} ({m.params.get('kind')}, {m.params.get('state')})"
    if m.params.get("loopback"):
        return _LOOPBACK_LABELS.get(m.metric, f"loopback {m.metric}")
    return None


def network_matrices(ms: Iterable[Measurement]) -> list[Matrix]:
    """TCP throughput, TCP latency and RDMA write bandwidth between nodes, sender x receiver."""
    between = [m for m in ms if "src_host" in m.params and not m.params.get("loopback")]
    tcp = NetworkMetrics.tcp_throughput.select(between)
    latency = NetworkMetrics.tcp_latency_us.select(between)
    rdma = NetworkMetrics.rdma_write_bw.select(between)
    tools = "/".join(sorted({str(m.params.get("tool")) for m in tcp}))
    streams = "/".join(sorted({str(m.params.get("streams")) for m in tcp}))
    matrices = [
        _matrix(tcp, title=f"TCP throughput, {tools}, {streams} streams"),
        _matrix(latency, title="TCP latency, median round trip of 64 B"),
        _matrix(rdma, title="RDMA write bandwidth, ib_write_bw"),
    ]
    return [mx for mx in matrices if mx.cells]


def _matrix(ms: list[Measurement], *, title: str) -> Matrix:
    """The best value per directed pair (by the unit's better direction); the link rate as
    reference when all pairs share one."""
    pick = min if ms and direction_of(ms[0]) == "lower" else max
    cells: dict[tuple[str, str], float] = {}
    for m in ms:
        pair = (str(m.params.get("src_host")), str(m.params.get("dst_host")))
        cells[pair] = pick(m.value, cells.get(pair, m.value))
    rates = {m.reference.value if m.reference else None for m in ms}
    rate = rates.pop() if len(rates) == 1 else None
    return Matrix(
        title=f"{title} (rows: sender, columns: receiver)",
        unit=ms[0].unit if ms else "",
        devices=sorted({host for pair in cells for host in pair}),
        cells=cells,
        reference=rate,
        reference_label="link",
        corner=_CORNER,
    )
