"""The memory section: device memory bandwidth per operation."""

from __future__ import annotations

from clusterbench.benchmarks.memory import MemoryMetrics
from clusterbench.schema import Measurement
from clusterbench.views.cells import Section, metric_rows, param

__all__ = ["section"]


def section(ms: list[Measurement], multi_host: bool) -> Section:
    def label(m: Measurement) -> str | None:
        return f"{param(m, 'op')}" if MemoryMetrics.bandwidth.matches(m) else m.metric

    return Section("memory", rows=metric_rows(ms, label=label, multi_host=multi_host))
