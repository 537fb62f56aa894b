"""A run fitted to a time budget (``run --budget``): the plan that cuts each benchmark to its
share, and the findings of what was cut, stopped or ran over."""

from __future__ import annotations

from clusterbench.registry import RunPart

__all__ = ["PART"]

_HERE = __name__

PART = RunPart(name="budget", findings=f"{_HERE}.findings:findings")
