"""Settings and metrics of the ``transfer`` benchmark: no torch (the CLI, analysis and the report
read them); its measurement is :mod:`.measure`."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from clusterbench.declared.transfer import TransferMetrics
from clusterbench.suites import check_suite

if TYPE_CHECKING:
    from typing import Self

__all__ = [
    "DIRECTIONS",
    "MEMORY_KINDS",
    "Direction",
    "MemoryKind",
    "TransferConfig",
    "TransferMetrics",
]

Direction = Literal["h2d", "d2h"]
MemoryKind = Literal["pinned", "pageable"]
DIRECTIONS: tuple[Direction, ...] = typing.get_args(Direction)
MEMORY_KINDS: tuple[MemoryKind, ...] = typing.get_args(MemoryKind)
_GIB, _MIB = 2**30, 2**20


@dataclass(kw_only=True, slots=True)
class TransferConfig:
    """Settings of the ``transfer`` benchmark."""

    directions: list[Direction] = field(default_factory=lambda: list(DIRECTIONS))
    """Host<->device directions: h2d (host to device), d2h (device to host)."""
    memory: list[MemoryKind] = field(default_factory=lambda: list(MEMORY_KINDS))
    """Host memory kinds: pinned (page-locked, DMA) and pageable (staged by the driver)."""
    pinned_size_bytes: int = 256 * _MIB
    """Bytes of each pinned host<->device copy (a copy of 256 MiB takes about 5 ms at PCIe
    Gen5's 55 GB/s: long against the timer's microseconds; standard and full copy 1 GiB)."""
    pageable_size_bytes: int = 128 * _MIB
    """Bytes of each pageable host<->device copy."""
    numa_remote: bool = True
    """Also time with the host buffer on another NUMA node than the GPU's, if there is one."""
    read_link: bool = True
    """Read the PCIe link's generation and width (NVML) during a pinned host->device copy."""
    p2p: bool = True
    """Time GPU->GPU copies between every ordered pair of the node's GPUs (local rank 0)."""
    p2p_size_bytes: int = _GIB
    """Bytes of each GPU->GPU copy."""
    warmup: int = 2
    """Untimed copies before the timed repeats."""
    repeats: int = 8
    """Timed copies per case; the median is reported."""

    def __post_init__(self) -> None:
        for name in ("directions", "memory"):
            if not getattr(self, name):
                raise ValueError(f"{name} must not be empty")
        for name in ("pinned_size_bytes", "pageable_size_bytes", "p2p_size_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.warmup < 0 or self.repeats < 1:
            raise ValueError(f"need warmup >= 0, repeats >= 1; got {self.warmup}, {self.repeats}")

    @classmethod
    def preset(cls, *, suite: str, device_type: str) -> Self:
        """Settings of ``suite`` (quick, standard, full) on ``device_type`` (cuda, cpu)."""
        check_suite(suite, device_type)
        if suite == "quick":  # the benchmark has no CPU form; the same settings serve both
            return cls()
        p2p_size = {"standard": 2, "full": 4}[suite] * _GIB
        repeats = {"standard": 20, "full": 40}[suite]
        return cls(pinned_size_bytes=_GIB, pageable_size_bytes=_GIB, p2p_size_bytes=p2p_size,
                   warmup=5, repeats=repeats)  # fmt: skip
