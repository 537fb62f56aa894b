"""The host inventory judged on its own (no benchmark): GPUs the spec table does not know."""

from __future__ import annotations

from clusterbench.registry import RunPart

__all__ = ["PART"]

_HERE = __name__

PART = RunPart(name="hosts", findings=f"{_HERE}.findings:findings")
