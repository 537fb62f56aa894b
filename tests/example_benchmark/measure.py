"""The ``tiny`` benchmark's measurement: the only module of its folder that imports torch."""

from __future__ import annotations

import time
from collections.abc import Iterator

import torch
import torch.distributed as dist

from clusterbench.runtime.dist import DistContext
from clusterbench.schema import Measurement, Stats
from tests.example_benchmark.settings import TinyConfig, TinyMetrics

__all__ = ["tiny"]


def tiny(ctx: DistContext, cfg: TinyConfig) -> Iterator[Measurement]:
    """All-reduce a vector of ones, check the sum, time it."""
    x = torch.ones(cfg.size)
    dist.all_reduce(x)
    wrong = int((x != ctx.world_size).sum())
    seconds = []
    for _ in range(cfg.repeats):
        t0 = time.perf_counter()
        dist.all_reduce(torch.ones(cfg.size))
        seconds.append(time.perf_counter() - t0)
    stats = Stats.from_samples([cfg.size / s for s in seconds])
    params = {"size": cfg.size}
    yield ctx.measurement(TinyMetrics.elements_per_s, value=stats.median, params=params,
                          stats=stats)  # fmt: skip
    yield ctx.measurement(TinyMetrics.wrong, value=wrong, params=params)
