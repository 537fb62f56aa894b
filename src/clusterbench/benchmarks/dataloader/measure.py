"""Input pipeline: a real DataLoader over files on disk against the training step's appetite.

Per dataset ('images': encoded JPEG/PNG files decoded per sample with a random crop, flip and
normalisation; 'tokens': a binary shard of uint16/uint32 token ids read through numpy.memmap):

1. time the training step alone on a batch already on the device (the rate it consumes);
   ``step_s`` makes the step take that long (it runs, then the rank waits out the rest), to
   size the loader for a model whose step time is known;
2. sweep num_workers x pin_memory x prefetch_factor and time the loader alone, batches moved to
   the device included (pinning only pays off in that copy): worker counts 0, 1, 2, 4, ... up
   to the cores per GPU, stopping once the loader outruns the step or the curve flattens (the
   rule: :mod:`.sweep`);
3. train with the real loader at the best and at PyTorch's default settings (0 workers, no
   pinning): busy = t_step / t_wall per step, i.e. 1 - the fraction spent waiting for data.

The files are read back from the OS page cache: the loader rate is the decode/collate rate of a
dataset that fits in memory (epoch 2 on), not the storage's read rate.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch.utils.data import Dataset

from clusterbench.benchmarks.dataloader.datasets import write_images, write_tokens
from clusterbench.benchmarks.dataloader.kinds import (
    worker_counts,
)
from clusterbench.benchmarks.dataloader.sweep import (
    DEFAULT_SETTING,
    LoaderSetting,
    by_workers,
    describe_rule,
    grid,
    lead_setting,
    loader_stop,
)
from clusterbench.benchmarks.dataloader.timing import first_batch, gpu_busy, loader_rate
from clusterbench.benchmarks.dataloader.workload import load_workload, make_train_step, padded_step
from clusterbench.benchmarks.sweep_stop import SweepStop, stop_finding
from clusterbench.benchmarks.training.strategies import StepTrainer
from clusterbench.runtime.cores import cores_per_rank
from clusterbench.runtime.dist import DistContext
from clusterbench.runtime.timing import rate_stats, time_op
from clusterbench.schema import Finding, Measurement, ParamValue, Stats

if TYPE_CHECKING:
    from clusterbench.benchmarks.training.workload import Batch, Workload
from clusterbench.benchmarks.dataloader.settings import (
    DataloaderConfig,
    DataloaderMetrics,
    DatasetName,
)

__all__ = [
    "DEFAULT_SETTING",
    "LoaderSetting",
    "dataloader",
    "gpu_busy",
    "loader_rate",
    "measure_input",
    "sweep_settings",
    "sweep_stop_finding",
]


_STEP_WARMUP = 2


def dataloader(ctx: DistContext, cfg: DataloaderConfig) -> Iterator[Measurement | Finding]:
    """Input pipeline: DataLoader rate over files vs the training step's rate; device busy %."""
    settings = sweep_settings(cfg, device=ctx.device, cores=cores_per_rank(ctx.local_world_size))
    ctx.progress.start(len(cfg.datasets) * (len(settings) + 3))
    if cfg.data_dir and not Path(cfg.data_dir).is_dir():
        raise ValueError(f"dataloader: data_dir {cfg.data_dir!r} is not an existing folder")
    stops: list[SweepStop] = []
    done = 0  # loader settings timed: the time budget stops the sweep between them
    prefix = f"clusterbench-data-rank{ctx.rank}-"
    with tempfile.TemporaryDirectory(prefix=prefix, dir=cfg.data_dir or None) as root:
        for name in cfg.datasets:
            if ctx.budget.expired():  # this rank's clock: a per-device loop, no collective
                break
            workload, dataset, batch_size = _prepare(name, cfg=cfg, ctx=ctx, root=Path(root))
            for item in measure_input(ctx, cfg, dataset_name=name, dataset=dataset,
                                      workload=workload, settings=settings,
                                      batch_size=batch_size, stops=stops):  # fmt: skip
                done += DataloaderMetrics.loader_samples_per_s.matches(item)
                yield item
            del workload, dataset
            if ctx.is_cuda:
                torch.cuda.empty_cache()
    if stops:
        yield sweep_stop_finding(ctx, cfg, stops)
    total = len(cfg.datasets) * len(settings)
    if ctx.budget.expired() and done < total:
        ctx.budget.stopped(done=done, total=total, unit="loader settings")


def sweep_stop_finding(ctx: DistContext, cfg: DataloaderConfig, stops: list[SweepStop]) -> Finding:
    """This rank's ``dataloader.sweep_stopped`` info: the rule, where each dataset stopped."""
    return stop_finding(
        "dataloader", stops, scope=f"host:{ctx.host}/{ctx.device_label}",
        rule=describe_rule(margin=cfg.sufficient_margin, plateau=cfg.plateau()),
        settings={"sufficient_margin": cfg.sufficient_margin, **cfg.plateau().params(),
                  "step_s": cfg.step_s},
    )  # fmt: skip


def _prepare(
    name: DatasetName, *, cfg: DataloaderConfig, ctx: DistContext, root: Path
) -> tuple[Workload, Dataset[Batch], int]:
    if name == "images":
        workload = load_workload(cfg.vision_model, device=ctx.device)
        images = write_images(
            root / "images",
            num=cfg.num_samples,
            size=cfg.image_size,
            fmt=cfg.image_format,
            workload=workload,
        )
        return workload, images, cfg.batch_size
    workload = load_workload(cfg.model, device=ctx.device, seq_len=cfg.seq_len or None)
    shard = write_tokens(root / "tokens.bin", num=cfg.num_samples, workload=workload)
    return workload, shard, cfg.token_batch_size


def sweep_settings(
    cfg: DataloaderConfig, *, device: torch.device, cores: int
) -> list[LoaderSetting]:
    """Every setting to time, in sweep order (:mod:`.sweep`): worker counts capped
    by ``cores`` (0, 1, 2, 4, ... up to them unless ``num_workers`` lists others), pinning only
    on CUDA."""
    workers = worker_counts(cfg.num_workers, cores=cores)
    return grid(workers, pin_memory=cfg.pin_memory, prefetch_factor=cfg.prefetch_factor,
                device=device)  # fmt: skip


def measure_input(
    ctx: DistContext,
    cfg: DataloaderConfig,
    *,
    dataset_name: DatasetName,
    dataset: Dataset[Batch],
    workload: Workload,
    settings: list[LoaderSetting],
    batch_size: int,
    stops: list[SweepStop] | None = None,
) -> Iterator[Measurement]:
    """Step rate alone, the loader sweep (ended early by the rule, each stop appended to
    ``stops``), then the busy fraction at the best and default settings."""
    step = padded_step(make_train_step(workload, precision=cfg.precision), seconds=cfg.step_s,
                       device=ctx.device)  # fmt: skip
    step_rate = _step_rate(ctx, cfg, step=step, dataset=dataset, batch_size=batch_size)
    step_params: dict[str, ParamValue] = {
        "model": workload.name, "batch_size": batch_size, "dataset": dataset_name,
    }  # fmt: skip
    if cfg.step_s > 0:
        step_params["step_s"] = cfg.step_s
    yield ctx.measurement(DataloaderMetrics.step_samples_per_s, value=step_rate.median,
                          params=step_params, stats=step_rate)  # fmt: skip
    ctx.progress.advance()
    rates: dict[LoaderSetting, float] = {}
    yield from _sweep(ctx, cfg, dataset_name=dataset_name, dataset=dataset, settings=settings,
                      batch_size=batch_size, demand=step_rate.median, rates=rates,
                      stops=stops)  # fmt: skip
    if not rates:  # the time budget was spent before the first setting
        return
    best = max(rates, key=rates.__getitem__)
    # the best setting, and PyTorch's defaults as the baseline (once if they are the best)
    choices = (
        {"best": best} if best == DEFAULT_SETTING else {"best": best, "default": DEFAULT_SETTING}
    )
    for choice, s in choices.items():
        if ctx.budget.expired():
            break
        busy, stats = gpu_busy(dataset, step=step, t_step_s=batch_size / step_rate.median,
                               setting=s, batch_size=batch_size, device=ctx.device,
                               warmup_steps=cfg.warmup_batches, steps=cfg.train_steps)  # fmt: skip
        params = {"dataset": dataset_name, **s.params(), "choice": choice}
        yield ctx.measurement(DataloaderMetrics.gpu_busy, value=busy, params=params, stats=stats)
        ctx.progress.advance()


def _sweep(
    ctx: DistContext,
    cfg: DataloaderConfig,
    *,
    dataset_name: DatasetName,
    dataset: Dataset[Batch],
    settings: list[LoaderSetting],
    batch_size: int,
    demand: float,
    rates: dict[LoaderSetting, float],
    stops: list[SweepStop] | None,
) -> Iterator[Measurement]:
    """The loader alone at each setting, worker count by worker count, into ``rates``; after
    each count the rule (:func:`.sweep.loader_stop`) may end the sweep."""
    groups = by_workers(settings)
    staged = cfg.sweep_stop  # the ladder at one setting a count, the variants at the best
    best_by_count: list[tuple[int, float]] = []

    def timed(s: LoaderSetting) -> Measurement:
        rate, stats = loader_rate(dataset, setting=s, batch_size=batch_size,
                                  device=ctx.device, warmup_batches=cfg.warmup_batches,
                                  measure_batches=cfg.measure_batches)  # fmt: skip
        rates[s] = rate
        params = {"dataset": dataset_name, **s.params(), "batch_size": batch_size}
        ctx.progress.advance()
        return ctx.measurement(DataloaderMetrics.loader_samples_per_s, value=rate,
                               params=params, stats=stats)  # fmt: skip

    for i, group in enumerate(groups):
        for s in [lead_setting(group)] if staged else group:
            if ctx.budget.expired():
                return
            yield timed(s)
        best_by_count.append((group[0].num_workers, max(rates[s] for s in group if s in rates)))
        if not staged:
            continue
        rest = groups[i + 1 :]
        stop = loader_stop(
            best_by_count, remaining=[g[0].num_workers for g in rest], demand=demand,
            margin=cfg.sufficient_margin, plateau=cfg.plateau(), dataset=dataset_name,
        )  # fmt: skip
        if stop is not None:
            if stops is not None:
                stops.append(stop)
            break
    if staged and best_by_count:  # the pin_memory x prefetch_factor variants at the best count
        top = max(best_by_count, key=lambda c: c[1])[0]
        for s in next(g for g in groups if g[0].num_workers == top):
            if s not in rates:
                if ctx.budget.expired():
                    return
                yield timed(s)
    ctx.progress.advance(len(settings) - len(rates))


def _step_rate(
    ctx: DistContext,
    cfg: DataloaderConfig,
    *,
    step: StepTrainer,
    dataset: Dataset[Batch],
    batch_size: int,
) -> Stats:
    """Samples/s of the training step alone, on a batch of the dataset already on the device."""
    x, y = first_batch(dataset, batch_size=batch_size, device=ctx.device)
    samples = time_op(lambda: step.step([(x, y)]), device=ctx.device, warmup=_STEP_WARMUP,
                      repeats=cfg.measure_batches)  # fmt: skip
    # samples/s = batch_size / t_step
    return rate_stats(samples, work=batch_size, scale=1.0)
