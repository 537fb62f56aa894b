"""The ``doctor`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch) and its cost model (:mod:`.cost`)."""

from clusterbench.benchmarks.doctor.settings import (
    NUMA_FINDING_ID,
    DoctorConfig,
    DoctorMetrics,
)

__all__ = ["NUMA_FINDING_ID", "DoctorConfig", "DoctorMetrics"]
