"""Device timers and statistics.

Device work is asynchronous: on CUDA every repeat is bracketed by events and read after one
synchronize; on CPU a host clock is read around the call.  Warm-up runs are never timed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import torch

from clusterbench.schema import Stats

__all__ = ["L2Flusher", "Stats", "synchronize", "time_op", "wall_clock"]
T = TypeVar("T")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def wall_clock(fn: Callable[[], T]) -> tuple[T, float]:
    """``fn()`` and the host seconds it took: for work that ends on the host (file I/O) or
    synchronizes the device itself."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


class L2Flusher:
    """Evicts the GPU's L2 between repeats by writing a buffer twice its size.

    A no-op on CPU (caches there are far smaller than the buffers we time).
    """

    def __init__(self, device: torch.device) -> None:
        self._buf: torch.Tensor | None = None
        if device.type == "cuda":
            l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
            size = max(2 * int(l2_bytes), 64 * 2**20)
            self._buf = torch.empty(size, dtype=torch.uint8, device=device)

    def __call__(self) -> None:
        if self._buf is not None:
            self._buf.fill_(1)


def time_op(
    fn: Callable[[], object],
    *,
    device: torch.device,
    warmup: int,
    repeats: int,
    before_each: Callable[[], None] | None = None,
    warmup_min_s: float = 0.0,
) -> list[float]:
    """Seconds taken by each of ``repeats`` calls of ``fn`` after ``warmup`` untimed calls.

    ``before_each`` (e.g. an L2 flush) runs before every timed call, outside the timed region.
    ``warmup_min_s`` keeps warming up until that much time has passed: a GPU coming from idle
    needs a fraction of a second to raise its clocks, longer than a few short kernels take.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    t0 = time.perf_counter()
    done = 0
    while done < warmup or (warmup_min_s > 0 and time.perf_counter() - t0 < warmup_min_s):
        if before_each is not None:
            before_each()
        fn()
        done += 1
        if done >= warmup and warmup_min_s > 0:
            synchronize(device)  # the host clock must see the device's work
    synchronize(device)
    if device.type == "cuda":
        return _time_cuda(fn, device=device, repeats=repeats, before_each=before_each)
    samples = []
    for _ in range(repeats):
        if before_each is not None:
            before_each()
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return samples


def _time_cuda(
    fn: Callable[[], object],
    *,
    device: torch.device,
    repeats: int,
    before_each: Callable[[], None] | None,
) -> list[float]:
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    for start, end in zip(starts, ends, strict=True):
        if before_each is not None:
            before_each()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize(device)
    # elapsed_time is in milliseconds
    return [s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends, strict=True)]


def rate_stats(samples_s: list[float], *, work: float, scale: float) -> Stats:
    """Statistics of a rate (work / time / scale) over per-repeat times in seconds.

    E.g. GB/s from bytes: ``rate_stats(t, work=nbytes, scale=1e9)``.
    """
    return Stats.from_samples([work / t / scale for t in samples_s if t > 0])
