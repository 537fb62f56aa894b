"""The built-in benchmarks and run parts, in the order a suite runs them and a report shows them.

Each benchmark is declared by its folder (``benchmarks/<name>/__init__``: one
:class:`~clusterbench.registry.Benchmark` naming its measurement, settings, metrics, cost
model, findings, section and figures); adding one is a new folder plus one line here.  The run
parts (:class:`~clusterbench.registry.RunPart`) are the analyses of the run as a whole, each
declared by its folder (``analyses/<name>/__init__``: what it computes, its findings, section
and figures, imported when first used); adding one is a new folder plus one line here.
"""

from __future__ import annotations

from clusterbench import registry
from clusterbench.analyses import (
    budget,
    cost,
    hosts,
    nccl,
    outliers,
    partition,
    placement,
    prediction,
    soak,
    telemetry,
)
from clusterbench.benchmarks import (
    attribution,
    checkpoint,
    collectives,
    dataloader,
    doctor,
    gemm,
    memory,
    network,
    sdc,
    selftest,
    training,
    transfer,
    weight_update,
)
from clusterbench.registry import Benchmark, RunPart

__all__ = ["BUILTIN", "RUN_PARTS", "builtin", "register_builtin"]

BUILTIN: tuple[Benchmark, ...] = (
    doctor.BENCHMARK,
    gemm.BENCHMARK,
    sdc.BENCHMARK,
    memory.BENCHMARK,
    transfer.BENCHMARK,
    collectives.BENCHMARK,
    network.BENCHMARK,
    training.BENCHMARK,
    weight_update.BENCHMARK,
    dataloader.BENCHMARK,
    checkpoint.BENCHMARK,
    attribution.BENCHMARK,
    selftest.BENCHMARK,
)

RUN_PARTS: tuple[RunPart, ...] = (
    hosts.PART,
    nccl.PART,
    prediction.PART,
    partition.PART,
    placement.PART,
    telemetry.PART,
    telemetry.SERIES,  # each benchmark's telemetry series, after its own plots
    budget.PART,
    outliers.PART,
    cost.PART,
    soak.PART,
)
_NAMES = frozenset(b.name for b in BUILTIN)


_registered = False


def register_builtin() -> None:
    """Register every built-in benchmark and run part, once: the entry points (the command
    line, the run pipeline) call it before anything looks one up, and a second call leaves the
    registry as it is (a test may have replaced a declaration since)."""
    global _registered
    if _registered:
        return
    _registered = True
    for benchmark in BUILTIN:
        registry.register(benchmark)
    for part in RUN_PARTS:
        registry.register_run_part(part)


def builtin(name: str) -> bool:
    return name in _NAMES
