"""The built-in benchmarks: one declaration each, in the order a suite runs them.

Each names the benchmark's pieces, which carry its name in every layer: the measurement and its
settings and metrics in ``benchmarks/<name>.py``, its verdicts in ``analysis/<name>.py``, its
summary section in ``report/sections/<name>.py`` and its figures in the HTML report in
``report/figures/<name>.py`` (docs/architecture.md).
"""

from __future__ import annotations

from clusterbench import registry
from clusterbench.analysis import attribution as attribution_analysis
from clusterbench.analysis import checkpoint as checkpoint_analysis
from clusterbench.analysis import collectives as collectives_analysis
from clusterbench.analysis import dataloader as dataloader_analysis
from clusterbench.analysis import gemm as gemm_analysis
from clusterbench.analysis import memory as memory_analysis
from clusterbench.analysis import network as network_analysis
from clusterbench.analysis import sdc as sdc_analysis
from clusterbench.analysis import training as training_analysis
from clusterbench.analysis import transfer as transfer_analysis
from clusterbench.analysis import weight_update as weight_update_analysis
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
    transfer,
    weight_update,
)
from clusterbench.benchmarks.attribution import cost as attribution_cost
from clusterbench.benchmarks.checkpoint import cost as checkpoint_cost
from clusterbench.benchmarks.collectives import cost as collectives_cost
from clusterbench.benchmarks.dataloader import cost as dataloader_cost
from clusterbench.benchmarks.doctor import cost as doctor_cost
from clusterbench.benchmarks.gemm import cost as gemm_cost
from clusterbench.benchmarks.memory import cost as memory_cost
from clusterbench.benchmarks.network import cost as network_cost
from clusterbench.benchmarks.sdc import cost as sdc_cost
from clusterbench.benchmarks.training import budget as training_cost
from clusterbench.benchmarks.training import settings as training_settings
from clusterbench.benchmarks.transfer import cost as transfer_cost
from clusterbench.benchmarks.weight_update import cost as weight_update_cost
from clusterbench.registry import ALL_SUITES, FROM_STANDARD, Benchmark
from clusterbench.report.figures import attribution as attribution_figures
from clusterbench.report.figures import checkpoint as checkpoint_figures
from clusterbench.report.figures import collectives as collectives_figures
from clusterbench.report.figures import dataloader as dataloader_figures
from clusterbench.report.figures import gemm as gemm_figures
from clusterbench.report.figures import memory as memory_figures
from clusterbench.report.figures import network as network_figures
from clusterbench.report.figures import training as training_figures
from clusterbench.report.figures import transfer as transfer_figures
from clusterbench.report.figures import weight_update as weight_update_figures
from clusterbench.report.sections import attribution as attribution_section
from clusterbench.report.sections import checkpoint as checkpoint_section
from clusterbench.report.sections import collectives as collectives_section
from clusterbench.report.sections import dataloader as dataloader_section
from clusterbench.report.sections import gemm as gemm_section
from clusterbench.report.sections import memory as memory_section
from clusterbench.report.sections import network as network_section
from clusterbench.report.sections import sdc as sdc_section
from clusterbench.report.sections import training as training_section
from clusterbench.report.sections import transfer as transfer_section
from clusterbench.report.sections import weight_update as weight_update_section

__all__ = ["BUILTIN", "builtin", "register_builtin"]

BUILTIN: tuple[Benchmark, ...] = (
    Benchmark(
        name="doctor",
        level=0,
        scope="per_device",
        suites=ALL_SUITES,
        run="clusterbench.benchmarks.doctor.measure:doctor",
        description=(
            "Configuration and health checks: NUMA, PCIe, NVLink, GPU health, NCCL, storage, the"
        ),
        settings=doctor.DoctorConfig,
        metrics=doctor.DoctorMetrics,
        budget=doctor_cost.MODEL,
    ),
    Benchmark(
        name="gemm",
        level=1,
        scope="per_device",
        suites=ALL_SUITES,
        run="clusterbench.benchmarks.gemm.measure:gemm",
        description="Matrix-multiply TFLOP/s per dtype over a sweep of shapes (best and geomean).",
        settings=gemm.GemmConfig,
        metrics=gemm.GemmMetrics,
        budget=gemm_cost.MODEL,
        findings=gemm_analysis.findings,
        section=gemm_section.section,
        figures=gemm_figures.figures,
    ),
    Benchmark(
        name="sdc",
        level=1,
        scope="per_device",
        suites=ALL_SUITES,
        run="clusterbench.benchmarks.sdc.measure:sdc",
        description=(
            "Bit-for-bit GEMM check: fixed inputs on every device, across repeats and like devices."
        ),
        settings=sdc.SdcConfig,
        metrics=sdc.SdcMetrics,
        budget=sdc_cost.MODEL,
        findings=sdc_analysis.findings,
        section=sdc_section.section,
    ),
    Benchmark(
        name="memory",
        level=1,
        scope="per_device",
        suites=ALL_SUITES,
        run="clusterbench.benchmarks.memory.measure:memory",
        description="Device memory bandwidth (GB/s): copy, read and write of large buffers.",
        settings=memory.MemoryConfig,
        metrics=memory.MemoryMetrics,
        budget=memory_cost.MODEL,
        findings=memory_analysis.findings,
        section=memory_section.section,
        figures=memory_figures.figures,
    ),
    Benchmark(
        name="transfer",
        level=1,
        scope="per_device",
        suites=ALL_SUITES,
        devices=frozenset({"cuda"}),
        run="clusterbench.benchmarks.transfer.measure:transfer",
        description=(
            "Host<->device (pinned, pageable, NUMA local/remote) and GPU<->GPU copy bandwidth."
        ),
        settings=transfer.TransferConfig,
        metrics=transfer.TransferMetrics,
        budget=transfer_cost.MODEL,
        findings=transfer_analysis.findings,
        section=transfer_section.section,
        figures=transfer_figures.figures,
    ),
    Benchmark(
        name="collectives",
        level=2,
        scope="collective",
        suites=ALL_SUITES,
        run="clusterbench.benchmarks.collectives.measure:collectives",
        description=(
            "Collective busbw / algbw (GB/s) and latency per op, size and group (nccl-tests style)."
        ),
        settings=collectives.CollectivesConfig,
        metrics=collectives.CollectivesMetrics,
        budget=collectives_cost.MODEL,
        findings=collectives_analysis.findings,
        section=collectives_section.section,
        figures=collectives_figures.figures,
    ),
    Benchmark(
        name="network",
        level=2,
        scope="collective",
        suites=FROM_STANDARD,
        run="clusterbench.benchmarks.network.measure:network",
        description=(
            "Host network: NIC rates, TCP throughput/latency and RDMA bandwidth between node pairs."
        ),
        settings=network.NetworkConfig,
        metrics=network.NetworkMetrics,
        budget=network_cost.MODEL,
        findings=network_analysis.findings,
        section=network_section.section,
        figures=network_figures.figures,
    ),
    Benchmark(
        name="training",
        level=3,
        scope="workload",
        suites=FROM_STANDARD,
        run="clusterbench.benchmarks.training.bench:training",
        description=(
            "Training throughput, MFU, memory and scaling efficiency of a model and strategy."
        ),
        settings=training_settings.TrainingConfig,
        metrics=training_settings.TrainingMetrics,
        budget=training_cost.MODEL,
        findings=training_analysis.findings,
        section=training_section.section,
        figures=training_figures.figures,
    ),
    Benchmark(
        name="weight_update",
        level=3,
        scope="per_device",
        suites=FROM_STANDARD,
        settings_from="training",
        run="clusterbench.benchmarks.weight_update.measure:weight_update",
        description=(
            "Optimizer step alone (GB/s of the bytes it must move), per optimizer and layout."
        ),
        settings=weight_update.WeightUpdateConfig,
        metrics=weight_update.WeightUpdateMetrics,
        budget=weight_update_cost.MODEL,
        findings=weight_update_analysis.findings,
        section=weight_update_section.section,
        figures=weight_update_figures.figures,
    ),
    Benchmark(
        name="dataloader",
        level=3,
        scope="per_device",
        suites=FROM_STANDARD,
        run="clusterbench.benchmarks.dataloader.measure:dataloader",
        description=(
            "Input pipeline: DataLoader rate over files vs the training step's rate; device busy %."
        ),
        settings=dataloader.DataloaderConfig,
        metrics=dataloader.DataloaderMetrics,
        budget=dataloader_cost.MODEL,
        findings=dataloader_analysis.findings,
        section=dataloader_section.section,
        figures=dataloader_figures.figures,
    ),
    Benchmark(
        name="checkpoint",
        level=3,
        scope="collective",
        suites=FROM_STANDARD,
        run="clusterbench.benchmarks.checkpoint.measure:checkpoint",
        description=(
            "Checkpoint save/load GB/s per format and state size, the α–β fit of each, the "
            "predicted"
        ),
        settings=checkpoint.CheckpointConfig,
        metrics=checkpoint.CheckpointMetrics,
        budget=checkpoint_cost.MODEL,
        findings=checkpoint_analysis.findings,
        section=checkpoint_section.section,
        figures=checkpoint_figures.figures,
    ),
    Benchmark(
        name="attribution",
        level=3,
        scope="workload",
        suites=FROM_STANDARD,
        settings_from="training",
        run="clusterbench.benchmarks.attribution.measure:attribution",
        description=(
            "Step time split into compute, memory, communication and coordination, per rank; then"
        ),
        settings=attribution.AttributionConfig,
        metrics=attribution.AttributionMetrics,
        budget=attribution_cost.MODEL,
        findings=attribution_analysis.findings,
        section=attribution_section.section,
        figures=attribution_figures.figures,
    ),
    Benchmark(
        name="selftest",
        level=0,
        scope="per_device",
        run=selftest.selftest,
        settings=selftest.SelftestConfig,
        metrics=selftest.SelftestMetrics,
    ),
)
_NAMES = frozenset(b.name for b in BUILTIN)


def register_builtin() -> None:
    """Register every built-in benchmark (again: a no-op)."""
    for benchmark in BUILTIN:
        registry.register(benchmark)


def builtin(name: str) -> bool:
    return name in _NAMES
