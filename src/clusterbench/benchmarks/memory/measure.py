"""Device memory bandwidth per device: copy, read and write over buffers far larger than L2.

Bytes are counted as STREAM and docs/reference.md count them: a copy moves its buffer twice (read
plus write); a read or a write moves it once.  Results are checked before timing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

from clusterbench.benchmarks.memory.settings import (
    ELEMENT_BYTES,
    MemoryConfig,
    MemoryMetrics,
    Op,
)
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.timing import rate_stats, time_op
from clusterbench.schema import Measurement, Reference

__all__ = ["memory"]
_WRITE_VALUE = 1.5
# The read kernel's float32 sum against a float64 sum of the same buffer: each thread adds a few
# thousand terms serially, so its error stays far below 1e-4; a wrong or partial read is ~1.
_READ_TOLERANCE = 1e-4


def memory(ctx: DistContext, cfg: MemoryConfig) -> Iterator[Measurement]:
    """Device memory bandwidth (GB/s): copy, read and write of large buffers."""
    ctx.progress.start(len(cfg.ops))
    numel = cfg.size_bytes // ELEMENT_BYTES
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
