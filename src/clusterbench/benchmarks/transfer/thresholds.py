"""The ``transfer`` benchmark's limits: keys of the ``[thresholds]`` table (``--set
thresholds.KEY=VALUE``), each with its default; its findings read them with
``thresholds.of(TransferThresholds)``."""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.thresholds import check_positive

__all__ = ["TransferThresholds"]


@dataclass(frozen=True, kw_only=True, slots=True)
class TransferThresholds:
    """Limits the transfer verdicts apply."""

    host_device_min_efficiency: float = 0.80
    """Pinned host<->device below this fraction of the PCIe link rate -> warn."""
    p2p_min_efficiency: float = 0.80
    """GPU<->GPU copy below this fraction of the NVLink spec -> warn (cluster-benchmarking guide:
    links >= 80%)."""
    remote_numa_max_loss: float = 0.20
    """Host<->device from another NUMA node more than this fraction slower -> info."""

    def __post_init__(self) -> None:
        check_positive(self)
