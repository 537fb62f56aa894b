"""Peer comparison: the device or GPU pair that falls behind its identical peers, by each
benchmark's peer rules."""

from __future__ import annotations

from clusterbench.registry import RunPart

__all__ = ["PART"]

_HERE = __name__

PART = RunPart(name="outliers", findings=f"{_HERE}.findings:outlier_findings")
