"""A soak's drift over its rounds: the series, the drift of each figure, its findings, section
and figures.  Sees every round."""

from __future__ import annotations

from clusterbench.registry import RunPart

__all__ = ["PART"]

_HERE = __name__

PART = RunPart(
    name="soak",
    compute=f"{_HERE}.drift:soak_analysis",
    findings=f"{_HERE}.findings:findings",
    section=f"{_HERE}.section:section",
    figures=f"{_HERE}.figures:figures",
    every_round=True,
)
