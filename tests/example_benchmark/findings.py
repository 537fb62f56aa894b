"""The ``tiny`` benchmark's verdicts."""

from __future__ import annotations

from clusterbench.schema import Finding, Results
from clusterbench.thresholds import Thresholds
from tests.example_benchmark.settings import TinyMetrics
from tests.example_benchmark.thresholds import TinyThresholds

__all__ = ["findings"]


def findings(results: Results, thresholds: Thresholds) -> list[Finding]:
    """A wrong sum fails; otherwise one line with the slowest rank's rate: a warning below
    ``thresholds.tiny_min_elements_per_s``, else info."""
    wrong = [m for m in TinyMetrics.wrong.select(results) if m.value > 0]
    if wrong:
        return [Finding(id="tiny.wrong_sum", severity="fail", scope="run",
                        message=f"{len(wrong)} ranks summed wrong")]  # fmt: skip
    rates = TinyMetrics.elements_per_s.select(results)
    if not rates:
        return []
    slowest = min(rates, key=lambda m: m.value)
    message = f"slowest rank {slowest.rank}: {slowest.value:.3g} elements/s"
    floor = thresholds.of(TinyThresholds).tiny_min_elements_per_s
    if slowest.value < floor:
        return [Finding(id="tiny.slow", severity="warn", scope="run",
                        message=f"{message}, below {floor:.3g}")]  # fmt: skip
    return [Finding(id="tiny.rate", severity="info", scope="run", message=message)]
