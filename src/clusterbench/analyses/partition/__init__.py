"""The training batch-size partition search judged: the best split of the global batch into
micro-batches and accumulation steps, its findings, section and figure."""

from __future__ import annotations

from clusterbench.registry import RunPart

__all__ = ["PART"]

_HERE = __name__

PART = RunPart(
    name="training partition",
    findings=f"{_HERE}.findings:run_findings",
    section=f"{_HERE}.section:section",
    figures=f"{_HERE}.figures:figures",
)
