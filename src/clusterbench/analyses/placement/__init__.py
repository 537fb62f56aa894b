"""Where each rank ran (CPU cores, NUMA node, NIC, GPU) and what of it costs speed."""

from __future__ import annotations

from clusterbench.registry import RunPart

__all__ = ["PART"]

_HERE = __name__

PART = RunPart(
    name="placement",
    compute=f"{_HERE}.placements:run_placements",
    findings=f"{_HERE}.placements:findings",
    section=f"{_HERE}.section:section",
)
