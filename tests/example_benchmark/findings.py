"""The ``tiny`` benchmark's verdicts."""

from __future__ import annotations

from clusterbench.schema import Finding, Results
from clusterbench.thresholds import Thresholds
from tests.example_benchmark.settings import TinyMetrics

__all__ = ["findings"]


def findings(results: Results, thresholds: Thresholds) -> list[Finding]:
    """A wrong sum fails; otherwise one info line with the slowest rank's rate."""
    wrong = [m for m in TinyMetrics.wrong.select(results) if m.value > 0]
    if wrong:
        return [Finding(id="tiny.wrong_sum", severity="fail", scope="run",
                        message=f"{len(wrong)} ranks summed wrong")]  # fmt: skip
    rates = TinyMetrics.elements_per_s.select(results)
    if not rates:
        return []
    slowest = min(rates, key=lambda m: m.value)
    message = f"slowest rank {slowest.rank}: {slowest.value:.3g} elements/s"
    return [Finding(id="tiny.rate", severity="info", scope="run", message=message)]
