"""The GPUs' telemetry: what held a GPU's clocks down while a figure was measured (its findings
and section), and each benchmark's telemetry series drawn after its own plots (a soak's over
every round)."""

from __future__ import annotations

from clusterbench.registry import RunPart

__all__ = ["PART", "SERIES"]

_HERE = __name__

PART = RunPart(
    name="telemetry",
    compute=f"{_HERE}.judge:telemetry_analysis",
    findings=f"{_HERE}.judge:findings",
    section=f"{_HERE}.section:section",
)
SERIES = RunPart(name="telemetry series", figures=f"{_HERE}.figures:by_benchmark", every_round=True)
"""Its own part: its figures go after each benchmark's own plots, from every round of a soak."""
