"""The ``tiny`` benchmark's part of the summary."""

from __future__ import annotations

from clusterbench.schema import Measurement
from clusterbench.views.cells import Section, metric_rows
from tests.example_benchmark.settings import TinyMetrics

__all__ = ["section"]


def section(ms: list[Measurement], multi_host: bool) -> Section:
    def label(m: Measurement) -> str | None:
        return (
            f"all-reduce of {m.params['size']} ones"
            if TinyMetrics.elements_per_s.matches(m)
            else None
        )

    return Section("tiny", rows=metric_rows(ms, label=label, multi_host=multi_host))
