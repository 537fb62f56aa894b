"""What the ``transfer`` benchmark records (:class:`TransferMetrics`): declared below the benchmarks
and the run-wide analyses, which both select by it; its settings module re-exports it."""

from __future__ import annotations

from clusterbench.metrics import Metric, MetricSet

__all__ = ["TransferMetrics"]


class TransferMetrics(MetricSet, benchmark="transfer"):
    bandwidth = Metric("GB/s", "higher", "median host<->device copy bandwidth of one case")
    # gen and width are judged against the link's maximum, never against peers
    pcie_link_gen = Metric("gen", "none", "PCIe generation read under a pinned h2d load")
    pcie_link_width = Metric("lanes", "none", "PCIe lanes read under a pinned h2d load")
    p2p_bandwidth = Metric("GB/s", "higher", "median GPU->GPU copy bandwidth of one ordered pair")
