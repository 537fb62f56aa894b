"""The run's training priced (``clusterbench cost`` and the summary's cost part): the prices,
the throughput at the cluster priced, the table, what each finding costs, section and figures."""

from __future__ import annotations

from clusterbench.registry import RunPart

__all__ = ["PART"]

_HERE = __name__

PART = RunPart(
    name="cost",
    compute=f"{_HERE}.table:run_cost",
    section=f"{_HERE}.section:section",
    figures=f"{_HERE}.figures:figures",
)
