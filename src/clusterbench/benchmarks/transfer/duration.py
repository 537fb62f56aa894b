"""How long the ``transfer`` benchmark takes, and how it is cut to a time budget.

Host<->device: per direction, host memory kind and NUMA placement, warm-up + repeats copies of
its size at the link's rate (this node's measured pinned/pageable h2d, else nominal PCIe 5
x16 rates); GPU<->GPU: every ordered pair of the node's GPUs, the same copies at the measured
(else nominal NVLink) rate; plus pinning the host buffers.
"""

from __future__ import annotations

from clusterbench.benchmarks.transfer.settings import TransferConfig
from clusterbench.durations import (
    DurationModel,
    Estimate,
    FactQuery,
    NodeFacts,
    Term,
    drop_cut,
    halve_cut,
)
from clusterbench.units import format_bytes

__all__ = ["MODEL", "estimate"]

NOMINAL_GBPS = {"pinned": 50.0, "pageable": 10.0, "p2p": 300.0}
"""Nominal rates where nothing was measured: PCIe 5 x16 pinned ~55 GB/s, pageable staged by
the driver a fifth of it, NVLink 4 one way ~300+ GB/s (docs/results/H200.md's ranges)."""
PIN_GBPS = 5.0
"""Nominal GB/s of allocating and page-locking host memory (cudaHostAlloc)."""
_MIN_SIZE = 64 << 20


def estimate(cfg: TransferConfig, facts: NodeFacts) -> Estimate:
    copies = cfg.warmup + cfg.repeats
    slots = 2 if cfg.numa_remote else 1
    terms = []
    for kind in cfg.memory:
        size = cfg.pinned_size_bytes if kind == "pinned" else cfg.pageable_size_bytes
        rate = facts.rate(f"transfer_{kind}_gbps", nominal=NOMINAL_GBPS[kind])
        seconds = slots * len(cfg.directions) * copies * size / (rate.value * 1e9)
        terms.append(
            Term(
                f"{kind}: {slots * len(cfg.directions)} x {copies} copies of "
                f"{format_bytes(size)} at {rate.value:.3g} GB/s ({rate.source})",
                seconds + slots * size / (PIN_GBPS * 1e9),
            )
        )
    gpus = facts.ranks_per_node
    if cfg.p2p and gpus > 1:
        rate = facts.rate("transfer_p2p_gbps", nominal=NOMINAL_GBPS["p2p"])
        pairs = gpus * (gpus - 1)
        terms.append(
            Term(
                f"p2p: {pairs} GPU pairs x {copies} copies at {rate.value:.3g} GB/s "
                f"({rate.source})",
                pairs * copies * cfg.p2p_size_bytes / (rate.value * 1e9),
            )
        )
    points = slots * len(cfg.memory) + (gpus * (gpus - 1) if cfg.p2p else 0)
    return Estimate(terms=tuple(terms), points=max(1, points))


MODEL = DurationModel(
    estimate=estimate,
    cuts=(
        halve_cut("repeats", floor=5),
        halve_cut("warmup", floor=1),
        drop_cut("memory", order=["pageable"]),
        halve_cut("p2p_size_bytes", floor=_MIN_SIZE, label=format_bytes),
        halve_cut("pinned_size_bytes", floor=_MIN_SIZE, label=format_bytes),
        halve_cut("pageable_size_bytes", floor=_MIN_SIZE, label=format_bytes),
    ),
    facts=tuple(
        FactQuery(name=f"transfer_{kind}_gbps", benchmark="transfer", metric=metric, params=params)
        for kind, metric, params in (
            ("pinned", "bandwidth", {"memory": "pinned", "direction": "h2d"}),
            ("pageable", "bandwidth", {"memory": "pageable", "direction": "h2d"}),
            ("p2p", "p2p_bandwidth", {}),
        )
    ),
)
