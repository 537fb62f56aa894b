"""What the ``network`` benchmark records (:class:`NetworkMetrics`): declared below the benchmarks
and the run-wide analyses, which both select by it; its settings module re-exports it."""

from __future__ import annotations

from clusterbench.metrics import Metric, MetricSet

__all__ = ["NetworkMetrics"]


class NetworkMetrics(MetricSet, benchmark="network"):
    """NIC rates per node leader; TCP and RDMA figures per directed node pair (src -> dst)."""

    nic_rate = Metric(
        "Gb/s",
        "higher",
        "link rate a NIC port reports (0 when unreadable, as on a port that is down)",
        only_when="a physical NIC (a virtual one that is up reports no rate and is left out)",
    )
    tcp_throughput = Metric(
        "Gb/s", "higher", "TCP throughput over several streams (iperf3 or the socket test)"
    )
    tcp_latency_us = Metric("us", "lower", "median round trip of a 64 B message over TCP")
    rdma_write_bw = Metric(
        "Gb/s",
        "higher",
        "RDMA write bandwidth (ib_write_bw average)",
        only_when="two or more nodes with RDMA NICs and perftest's ib_write_bw",
    )
