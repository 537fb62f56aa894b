"""The built-in benchmarks and run parts, in the order a suite runs them and a report shows them.

Each benchmark is declared by its folder (``benchmarks/<name>/__init__``: one
:class:`~clusterbench.registry.Benchmark` naming its measurement, settings, metrics, cost
model, findings, section and figures); adding one is a new folder plus one line here.  The run
parts (:class:`~clusterbench.registry.RunPart`) are the analyses of the run as a whole; each
names its findings, section and figures, imported when first used.
"""

from __future__ import annotations

from clusterbench import registry
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

_A = "clusterbench.analysis"
_S = "clusterbench.report.sections"
_F = "clusterbench.report.figures"
RUN_PARTS: tuple[RunPart, ...] = (
    RunPart(name="hosts", findings=f"{_A}.hosts:findings"),
    RunPart(name="nccl", findings=f"{_A}.nccl:nccl_findings"),
    RunPart(
        name="prediction",
        compute=f"{_A}.prediction_findings:prediction_of",
        findings=f"{_A}.prediction_findings:findings",
        section=f"{_S}.prediction:section",
        figures=f"{_F}.prediction:figures",
    ),
    RunPart(
        name="training partition",
        findings=f"{_A}.partition_findings:run_findings",
        section=f"{_S}.partition:section",
        figures=f"{_F}.partition:figures",
    ),
    RunPart(
        name="placement",
        compute=f"{_A}.placement:run_placements",
        findings=f"{_A}.placement:findings",
        section=f"{_S}.placement:section",
    ),
    RunPart(
        name="telemetry",
        compute=f"{_A}.telemetry:telemetry_analysis",
        findings=f"{_A}.telemetry:findings",
        section=f"{_S}.telemetry:section",
    ),
    # each benchmark's telemetry series, after its own plots; a soak's over every round
    RunPart(name="telemetry series", figures=f"{_F}.telemetry:by_benchmark", every_round=True),
    RunPart(name="budget", findings=f"{_A}.budget:findings"),
    RunPart(name="outliers", findings=f"{_A}.outliers:outlier_findings"),
    RunPart(name="cost", section=f"{_S}.cost:section", figures=f"{_F}.cost:figures"),
    RunPart(
        name="soak",
        compute=f"{_A}.soak:soak_analysis",
        findings=f"{_A}.soak_findings:findings",
        section=f"{_S}.soak:section",
        figures=f"{_F}.soak:figures",
        every_round=True,
    ),
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
