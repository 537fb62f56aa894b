"""Device memory bandwidth per device: copy, read and write over buffers far larger than L2.

Bytes are counted as STREAM and docs/reference.md count them: a copy moves its buffer twice (read
plus write); a read or a write moves it once.  Results are checked before timing.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import torch

from clusterbench.benchmarks.presets import check_suite
from clusterbench.metrics import Metric, MetricSet
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.timing import rate_stats, time_op
from clusterbench.schema import Measurement, Reference

if TYPE_CHECKING:
    from typing import Self

__all__ = ["OPS", "MemoryConfig", "MemoryMetrics", "Op", "memory"]

Op = Literal["copy", "read", "write"]
OPS: tuple[Op, ...] = typing.get_args(Op)
_ELEMENT_BYTES = 4  # buffers are float32
_WRITE_VALUE = 1.5
# The read kernel's float32 sum against a float64 sum of the same buffer: each thread adds a few
# thousand terms serially, so its error stays far below 1e-4; a wrong or partial read is ~1.
_READ_TOLERANCE = 1e-4
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
        if self.size_bytes <= 0 or self.size_bytes % _ELEMENT_BYTES:
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


def memory(ctx: DistContext, cfg: MemoryConfig) -> Iterator[Measurement]:
    """Device memory bandwidth (GB/s): copy, read and write of large buffers."""
    ctx.progress.start(len(cfg.ops))
    numel = cfg.size_bytes // _ELEMENT_BYTES
    src = torch.rand(numel, device=ctx.device)  # random, never zeros
    dst = torch.empty_like(src) if "copy" in cfg.ops or "write" in cfg.ops else src
    for i, op in enumerate(cfg.ops):
        if i and ctx.budget.expired():  # this rank's clock: no collective here to keep in step
            ctx.budget.stopped(done=i, total=len(cfg.ops), unit="ops")
            break
        fn, bytes_moved = _prepare(op, src=src, dst=dst)
        samples = time_op(fn, device=ctx.device, warmup=cfg.warmup, repeats=cfg.repeats)
        if op == "write":
            _check_written(dst)
        # GB/s = bytes moved / t / 1e9
        stats = rate_stats(samples, work=bytes_moved, scale=1e9)
        yield ctx.measurement(
            MemoryMetrics.bandwidth,
            value=stats.median,
            params={"op": op, "size_bytes": cfg.size_bytes},
            stats=stats,
            reference=_spec_reference(ctx),
        )
        ctx.progress.advance()


def _prepare(op: Op, *, src: torch.Tensor, dst: torch.Tensor) -> tuple[Callable[[], object], int]:
    """The operation to time, checked once, and the bytes one run moves."""
    size_bytes = src.numel() * src.element_size()
    if op == "copy":
        dst.fill_(float("nan"))  # poison: an element the copy misses fails the comparison
        dst.copy_(src)
        if not torch.equal(dst, src):
            raise RuntimeError("memory: copy produced a buffer that differs from its source")
        return lambda: dst.copy_(src), 2 * size_bytes  # bytes = read src + write dst
    if op == "read":
        _check_sum(src)
        # A full reduction reads every byte once and writes one scalar.  In an exploratory run
        # on an H200 a float32 sum was as fast as amax / max and the copy, and faster than a
        # bf16 view or row-wise sums; the recorded read figures are in docs/results/H200.md.
        return lambda: torch.sum(src), size_bytes
    assert op == "write", op
    return lambda: dst.fill_(_WRITE_VALUE), size_bytes


def _check_sum(src: torch.Tensor) -> None:
    # rel = |sum32 - sum64| / |sum64|
    got = torch.sum(src).double()
    ref = torch.sum(src, dtype=torch.float64)
    rel = float((got - ref).abs() / ref.abs())
    if not rel <= _READ_TOLERANCE:
        raise RuntimeError(f"memory: read (sum) off by {rel:.3g} relative (> {_READ_TOLERANCE:g})")


def _check_written(dst: torch.Tensor) -> None:
    if not bool((dst == _WRITE_VALUE).all()):
        raise RuntimeError("memory: write (fill) left elements with other values")


def _spec_reference(ctx: DistContext) -> Reference | None:
    spec = ctx.gpu.spec if ctx.gpu is not None else None
    if spec is None:
        return None
    return Reference(value=spec.hbm_gbps, kind="spec_peak", source=spec.source)
