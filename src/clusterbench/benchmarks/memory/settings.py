"""Settings and metrics of the ``memory`` benchmark: no torch (the CLI, analysis and the report
read them); its measurement is :mod:`.measure`."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from clusterbench.metrics import Metric, MetricSet
from clusterbench.suites import check_suite

if TYPE_CHECKING:
    from typing import Self

__all__ = ["OPS", "MemoryConfig", "MemoryMetrics", "Op"]

Op = Literal["copy", "read", "write"]
OPS: tuple[Op, ...] = typing.get_args(Op)
ELEMENT_BYTES = 4  # buffers are float32
_GIB = 2**30
_MIB = 2**20


class MemoryMetrics(MetricSet, benchmark="memory"):
    bandwidth = Metric("GB/s", "higher", "median device-memory bandwidth of one op (STREAM bytes)")


@dataclass(kw_only=True, slots=True)
class MemoryConfig:
    """Settings of the ``memory`` benchmark."""

    ops: list[Op] = field(default_factory=lambda: list(OPS))
    """Operations: copy (dst.copy_(src)), read (sum of the buffer), write (fill)."""
    size_bytes: int = 2 * _GIB
    """Bytes of each buffer (a copy uses two); many times the L2 cache."""
    warmup: int = 5
    """Untimed runs before the timed repeats of each operation."""
    repeats: int = 30
    """Timed runs per operation; the median is reported."""

    def __post_init__(self) -> None:
        if not self.ops:
            raise ValueError("ops must not be empty")
        if self.size_bytes <= 0 or self.size_bytes % ELEMENT_BYTES:
            raise ValueError(f"size_bytes must be a positive multiple of 4, got {self.size_bytes}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats}")

    @classmethod
    def preset(cls, *, suite: str, device_type: str) -> Self:
        """Settings of ``suite`` (quick, standard, full) on ``device_type`` (cuda, cpu)."""
        check_suite(suite, device_type)
        if device_type == "cpu":
            size = 128 * _MIB if suite == "quick" else 256 * _MIB
            return cls(ops=["copy", "read"], size_bytes=size, warmup=1, repeats=5)
        # H200: 50 MB of L2 (60 MB as torch reports it); 2 GiB is ~35x that.
        size = {"quick": 2 * _GIB, "standard": 4 * _GIB, "full": 8 * _GIB}[suite]
        return cls(size_bytes=size, warmup=5, repeats=30 if suite == "quick" else 50)
