"""Settings and metrics of the ``doctor`` benchmark: no torch (the CLI, analysis and the report
read them); its measurement is :mod:`.measure`."""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.declared.doctor import NUMA_FINDING_ID
from clusterbench.metrics import Metric, MetricSet

__all__ = ["NUMA_FINDING_ID", "DoctorConfig", "DoctorMetrics"]


class DoctorMetrics(MetricSet, benchmark="doctor"):
    checks_run = Metric("count", "none", "host checks the node ran (local rank 0)")


@dataclass(kw_only=True, slots=True)
class DoctorConfig:
    checkpoint_dir: str = ""
    """Folder whose file system and free space are checked ('' = the node's temp dir)."""
