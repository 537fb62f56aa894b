"""The ``network`` benchmark's limits: keys of the ``[thresholds]`` table (``--set
thresholds.KEY=VALUE``), each with its default; its findings read them with
``thresholds.of(NetworkThresholds)``."""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.thresholds import check_positive

__all__ = ["NetworkThresholds"]


@dataclass(frozen=True, kw_only=True, slots=True)
class NetworkThresholds:
    """Limits the network verdicts apply."""

    network_min_efficiency: float = 0.80
    """Node-to-node TCP/RDMA below this fraction of the slower link rate -> warn
    (cluster-benchmarking guide: "less than 80% of theoretical, start debugging")."""
    min_internode_gbps_large_model: float = 400.0
    """Per-node inter-node Gb/s needed for models above 7B parameters (cluster-benchmarking guide:
    400, prefer 800)."""
    model_params_b: float | None = None
    """Model size in billions of parameters; enables the large-model network check."""

    def __post_init__(self) -> None:
        check_positive(self)
