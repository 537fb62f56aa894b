"""The ``doctor`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch) and its duration model (:mod:`.duration`)."""

from clusterbench.benchmarks.doctor.duration import MODEL
from clusterbench.benchmarks.doctor.settings import (
    NUMA_FINDING_ID,
    DoctorConfig,
    DoctorMetrics,
)
from clusterbench.registry import ALL_SUITES, Benchmark

__all__ = ["BENCHMARK", "NUMA_FINDING_ID", "DoctorConfig", "DoctorMetrics"]

BENCHMARK = Benchmark(
    name="doctor",
    level=0,
    scope="per_device",
    suites=ALL_SUITES,
    run="clusterbench.benchmarks.doctor.measure:doctor",
    description=(
        "Configuration and health checks: NUMA, PCIe, NVLink, GPU health, NCCL, storage, and "
        "where each rank runs."
    ),
    settings=DoctorConfig,
    metrics=DoctorMetrics,
    durations=MODEL,
)
