"""The run's training predicted at larger GPU counts (``clusterbench predict``): the data-parallel
scaling model, the collectives' cost model, the model-parallel layouts of a stated workload,
what a run's prediction reads, its findings, section and figures."""

from __future__ import annotations

from clusterbench.registry import RunPart

__all__ = ["PART"]

_HERE = __name__

PART = RunPart(
    name="prediction",
    compute=f"{_HERE}.findings:prediction_of",
    findings=f"{_HERE}.findings:findings",
    section=f"{_HERE}.section:section",
    figures=f"{_HERE}.figures:figures",
)
