"""Timing of the ``dataloader`` benchmark: the loader alone, and training from it.

A DataLoader samples with replacement (any number of batches from any number of files,
shuffled); each batch is moved to the device (non-blocking from pinned memory) before the
clock reads it.

Workers start the way they do in a training script that torchrun or srun started: with a fresh
interpreter's start method (fork on Linux before Python 3.14, forkserver from it, spawn
elsewhere).  The benchmark's ranks are themselves spawned, and spawn is the start method they
inherit: a spawned worker re-imports torch and the benchmark before its first batch, and runs
slower after it (``scripts/loader_start_method.py`` on a 2-core VM: 1.35 s against 0.04 s to the
first batch, 236 against 423 batches/s).
"""

from __future__ import annotations

import itertools
import math
import multiprocessing
import sys
import time
from collections.abc import Sized
from typing import cast

import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler

from clusterbench.benchmarks.dataloader.sweep import DEFAULT_SETTING, LoaderSetting
from clusterbench.benchmarks.training.strategies import StepTrainer
from clusterbench.benchmarks.training.workload import Batch
from clusterbench.runtime.timing import rate_stats, synchronize
from clusterbench.schema import Stats

__all__ = ["first_batch", "gpu_busy", "loader_rate", "make_loader", "worker_start_method"]


def worker_start_method() -> str | None:
    """The start method a fresh interpreter gives DataLoader workers here (None: the one in
    force, where the platform has neither fork nor forkserver)."""
    methods = multiprocessing.get_all_start_methods()
    if sys.platform.startswith("linux"):
        wanted = "forkserver" if sys.version_info >= (3, 14) else "fork"
        return wanted if wanted in methods else None
    return "spawn" if "spawn" in methods else None


def make_loader(
    dataset: Dataset[Batch], *, setting: LoaderSetting, batch_size: int, num_batches: int
) -> DataLoader[Batch]:
    # sampling with replacement: any number of batches from any number of files, shuffled
    sampler = RandomSampler(
        cast(Sized, dataset), replacement=True, num_samples=num_batches * batch_size
    )
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        drop_last=True,
        num_workers=setting.num_workers,
        pin_memory=setting.pin_memory,
        prefetch_factor=setting.prefetch_factor,
        multiprocessing_context=worker_start_method() if setting.num_workers > 0 else None,
    )


def _to_device(batch: Batch, *, device: torch.device, non_blocking: bool) -> Batch:
    x, y = batch
    return x.to(device, non_blocking=non_blocking), y.to(device, non_blocking=non_blocking)


def first_batch(dataset: Dataset[Batch], *, batch_size: int, device: torch.device) -> Batch:
    loader = make_loader(dataset, setting=DEFAULT_SETTING, batch_size=batch_size, num_batches=1)
    return _to_device(next(iter(loader)), device=device, non_blocking=False)


def loader_rate(
    dataset: Dataset[Batch],
    *,
    setting: LoaderSetting,
    batch_size: int,
    device: torch.device,
    warmup_batches: int,
    measure_batches: int,
) -> tuple[float, Stats]:
    """Samples/s the loader delivers to ``device``: overall rate, and statistics over windows.

    Workers hand batches over in turns, so a single batch's wait is near zero or a whole
    decode; each window holds one batch per worker to average that out.
    """
    window = max(1, setting.num_workers)
    num_windows = max(1, math.ceil(measure_batches / window))
    total = warmup_batches + num_windows * window
    loader = make_loader(dataset, setting=setting, batch_size=batch_size, num_batches=total)
    marks: list[float] = []
    for i, batch in enumerate(loader):
        _to_device(batch, device=device, non_blocking=setting.pin_memory)
        done = i + 1 - warmup_batches
        if done >= 0 and done % window == 0:
            synchronize(device)
            marks.append(time.perf_counter())
    times = [b - a for a, b in itertools.pairwise(marks)]
    # samples/s = samples / seconds
    rate = batch_size * window * len(times) / sum(times)
    return rate, rate_stats(times, work=batch_size * window, scale=1.0)


def gpu_busy(
    dataset: Dataset[Batch],
    *,
    step: StepTrainer,
    t_step_s: float,
    setting: LoaderSetting,
    batch_size: int,
    device: torch.device,
    warmup_steps: int,
    steps: int,
) -> tuple[float, Stats]:
    """Busy % of the device while training from the loader: 100 * t_step / wall per step.

    The value uses the mean wall time (waits add up); the statistics are per step.
    """
    loader = make_loader(
        dataset, setting=setting, batch_size=batch_size, num_batches=warmup_steps + steps
    )
    marks: list[float] = []
    for i, batch in enumerate(loader):
        x, y = _to_device(batch, device=device, non_blocking=setting.pin_memory)
        step.step([(x, y)])
        if i + 1 >= warmup_steps:
            synchronize(device)
            marks.append(time.perf_counter())
    walls = [b - a for a, b in itertools.pairwise(marks)]
    # busy = t_step / t_wall (capped at 100%: a step may run faster than its median)
    per_step = [min(100.0, 100.0 * t_step_s / w) for w in walls if w > 0]
    busy = min(100.0, 100.0 * t_step_s * len(walls) / sum(walls))
    return busy, Stats.from_samples(per_step)
