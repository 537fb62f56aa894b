"""What NCCL's own log says (``--nccl-debug``): how data actually moved between GPUs; and the
reader of nccl-tests' outputs that ``clusterbench import nccl-tests`` uses."""

from __future__ import annotations

from clusterbench.registry import RunPart

__all__ = ["PART"]

_HERE = __name__

PART = RunPart(name="nccl", findings=f"{_HERE}.findings:nccl_findings")
