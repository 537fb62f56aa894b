"""Settings and metrics of the ``network`` benchmark, without torch (the CLI, analysis and
the report read them); its measurement is :mod:`.measure`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from clusterbench.benchmarks.pair_plan import (
    DEFAULT_PARTNERS,
    PairStrategy,
)
from clusterbench.declared.network import NetworkMetrics
from clusterbench.suites import check_suite

if TYPE_CHECKING:
    from typing import Self


__all__ = ["NetworkConfig", "NetworkMetrics", "Tool"]

Tool = Literal["auto", "iperf3", "socket"]


@dataclass(kw_only=True, slots=True)
class NetworkConfig:
    """Settings of the ``network`` benchmark."""

    streams: int = 4
    """Parallel TCP streams of a throughput test (one stream rarely fills a fast link)."""
    duration_s: float = 2.0
    """Seconds of each TCP throughput test."""
    latency_round_trips: int = 1000
    """Round trips of 64 B messages in the TCP latency test; the median is reported."""
    tool: Tool = "auto"
    """TCP throughput tool: auto (iperf3 when both nodes have it), iperf3 or socket."""
    rdma: bool = True
    """Run ib_write_bw between nodes when it is installed and RDMA ports are ACTIVE."""
    bind_address: str = ""
    """Address or interface to test over; empty: the address that routes to MASTER_ADDR."""
    node_pairs: PairStrategy = "auto"
    """Which node pairs to test, each both ways: all (2(k - 1) rounds for k nodes), sparse
    (each node against ``pair_partners`` partners, then the suspects against nodes known good:
    at most 2(``pair_partners`` + 3) rounds whatever k), auto (all up to 8 nodes, sparse
    above)."""
    pair_partners: int = DEFAULT_PARTNERS
    """Survey partners per node of the sparse node-pair plan (2 or more)."""

    def __post_init__(self) -> None:
        if self.streams < 1:
            raise ValueError(f"streams must be >= 1, got {self.streams}")
        if self.duration_s <= 0:
            raise ValueError(f"duration_s must be positive, got {self.duration_s}")
        if self.latency_round_trips < 1:
            raise ValueError(f"latency_round_trips must be >= 1, got {self.latency_round_trips}")
        if self.pair_partners < 2:
            raise ValueError(f"pair_partners must be >= 2, got {self.pair_partners}")

    @classmethod
    def preset(cls, *, suite: str, device_type: str) -> Self:
        """Settings of ``suite`` (quick, standard, full) on ``device_type`` (cuda, cpu)."""
        check_suite(suite, device_type)
        if device_type == "cpu":
            return cls(streams=2, duration_s=1.0, latency_round_trips=200)
        if suite == "full":
            return cls(streams=8, duration_s=10.0, latency_round_trips=5000)
        return cls(streams=4, duration_s=2.0 if suite == "quick" else 5.0)
