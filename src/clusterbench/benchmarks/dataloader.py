"""Input pipeline: a real DataLoader over files on disk against the training step's appetite.

Per dataset ('images': encoded JPEG/PNG files decoded per sample with a random crop, flip and
normalisation; 'tokens': a binary shard of uint16/uint32 token ids read through numpy.memmap):

1. sweep num_workers x pin_memory x prefetch_factor and time the loader alone, batches moved to
   the device included (pinning only pays off in that copy);
2. time the training step alone on a batch already on the device (the rate it consumes);
3. train with the real loader at the best and at PyTorch's default settings (0 workers, no
   pinning): busy = t_step / t_wall per step, i.e. 1 - the fraction spent waiting for data.

The files are read back from the OS page cache: the loader rate is the decode/collate rate of a
dataset that fits in memory (epoch 2 on), not the storage's read rate.
"""

from __future__ import annotations

import itertools
import math
import tempfile
import time
import typing
from collections.abc import Iterator, Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler

from clusterbench.benchmarks.dataloader_datasets import ImageFormat, write_images, write_tokens
from clusterbench.benchmarks.dataloader_workload import (
    SmallCnn,
    StepPrecision,
    load_workload,
    make_train_step,
)
from clusterbench.benchmarks.presets import check_suite
from clusterbench.benchmarks.training.models import DecoderModel, VisionModel
from clusterbench.benchmarks.training.strategies import Trainer
from clusterbench.metrics import Metric, MetricSet
from clusterbench.runtime.dist import DistContext, cores_per_rank
from clusterbench.runtime.timing import rate_stats, synchronize, time_op
from clusterbench.schema import Measurement, ParamValue, Stats

if TYPE_CHECKING:
    from typing import Self

    from clusterbench.benchmarks.training.workload import Batch, Workload

__all__ = [
    "DATASETS",
    "DEFAULT_SETTING",
    "DataloaderConfig",
    "DataloaderMetrics",
    "DatasetName",
    "ImageModel",
    "LoaderSetting",
    "dataloader",
    "gpu_busy",
    "loader_rate",
    "measure_input",
]

DatasetName = Literal["images", "tokens"]
DATASETS: tuple[DatasetName, ...] = typing.get_args(DatasetName)
ImageModel = Literal[VisionModel, SmallCnn]
"""The classifiers the images can feed: the torchvision presets and the CPU-sized one."""


class DataloaderMetrics(MetricSet, benchmark="dataloader"):
    loader_samples_per_s = Metric(
        "samples/s", "higher", "samples the DataLoader delivers to the device, per loader setting"
    )
    step_samples_per_s = Metric(
        "samples/s", "higher", "samples the training step consumes from a batch on the device"
    )
    gpu_busy = Metric(
        "%", "none", "device busy while training from the loader: 100 x t_step / t_wall"
    )


_STEP_WARMUP = 2
# fmt: off
_PRESETS: dict[str, dict[str, Any]] = {
    "cpu": dict(vision_model="small_cnn", model="tiny", num_samples=64, image_size=64,
                batch_size=8, token_batch_size=4, num_workers=[0, 2], pin_memory=[False],
                prefetch_factor=[2], warmup_batches=2, measure_batches=6, train_steps=6,
                precision="fp32"),
    "quick": dict(num_samples=1024, num_workers=[0, 4, 8], prefetch_factor=[2],
                  measure_batches=16, train_steps=12),
    "full": dict(num_samples=4096, num_workers=[0, 2, 4, 8, 16], prefetch_factor=[2, 4, 8],
                 measure_batches=48, train_steps=40),
}  # "standard" on CUDA: the field defaults
# fmt: on


@dataclass(kw_only=True, slots=True)
class DataloaderConfig:
    """Settings of the ``dataloader`` benchmark."""

    datasets: list[DatasetName] = field(default_factory=lambda: list(DATASETS))
    """'images' (encoded files, decoded per sample) and/or 'tokens' (memmapped shard)."""
    data_dir: str = ""
    """Existing folder to write the dataset under ('' = the node's temp dir); removed after."""
    vision_model: ImageModel = "resnet50"
    """Workload the images feed ('small_cnn' is a built-in CPU-sized one)."""
    model: DecoderModel = "125m"
    """Decoder workload the tokens feed."""
    seq_len: int = 0
    """Decoder sequence length (0 = the preset's)."""
    num_samples: int = 2048
    """Image files written; token windows in the shard."""
    image_size: int = 256
    """Stored image side in pixels; samples are randomly cropped to the model's input side."""
    image_format: ImageFormat = "jpeg"
    """'jpeg' or 'png'."""
    batch_size: int = 64
    """Images per batch."""
    token_batch_size: int = 8
    """Token windows per batch."""
    num_workers: list[int] = field(default_factory=lambda: [0, 2, 4, 8])
    """Worker counts to sweep; capped by the CPU cores of one rank."""
    pin_memory: list[bool] = field(default_factory=lambda: [False, True])
    """Pinning to sweep; True only on CUDA."""
    prefetch_factor: list[int] = field(default_factory=lambda: [2, 4])
    """Batches prefetched per worker to sweep (with workers only)."""
    warmup_batches: int = 3
    """Untimed batches (worker start-up) before each timed run."""
    measure_batches: int = 24
    """Timed batches per loader setting."""
    train_steps: int = 20
    """Timed training steps with the real loader, per setting."""
    precision: StepPrecision = "bf16"
    """Training step precision: 'bf16' (autocast) or 'fp32'."""

    def __post_init__(self) -> None:
        if not self.datasets or not self.num_workers or not self.pin_memory:
            raise ValueError("datasets, num_workers and pin_memory must not be empty")
        if min(self.num_workers) < 0 or min(self.prefetch_factor, default=1) < 1:
            raise ValueError("num_workers must be >= 0 and prefetch_factor >= 1")
        if self.warmup_batches < 1:
            raise ValueError(f"warmup_batches must be >= 1, got {self.warmup_batches}")
        for name in ("num_samples", "image_size", "batch_size", "token_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.measure_batches < 1 or self.train_steps < 1 or self.seq_len < 0:
            raise ValueError("measure_batches and train_steps must be >= 1, seq_len >= 0")

    @classmethod
    def preset(cls, *, suite: str, device_type: str) -> Self:
        """Settings of ``suite`` (quick, standard, full) on ``device_type`` (cuda, cpu)."""
        check_suite(suite, device_type)
        key = "cpu" if device_type == "cpu" else suite
        return cls(**_PRESETS.get(key, {}))


@dataclass(frozen=True, slots=True)
class LoaderSetting:
    num_workers: int
    pin_memory: bool
    prefetch_factor: int | None
    """None without workers (the DataLoader rejects it then)."""

    def params(self) -> dict[str, ParamValue]:
        return {
            "num_workers": self.num_workers,
            "pin_memory": self.pin_memory,
            "prefetch_factor": self.prefetch_factor,
        }


DEFAULT_SETTING = LoaderSetting(num_workers=0, pin_memory=False, prefetch_factor=None)
"""torch.utils.data.DataLoader's defaults."""


def dataloader(ctx: DistContext, cfg: DataloaderConfig) -> Iterator[Measurement]:
    """Input pipeline: DataLoader rate over files vs the training step's rate; device busy %."""
    settings = sweep_settings(cfg, device=ctx.device, cores=cores_per_rank(ctx.local_world_size))
    ctx.progress.start(len(cfg.datasets) * (len(settings) + 3))
    if cfg.data_dir and not Path(cfg.data_dir).is_dir():
        raise ValueError(f"dataloader: data_dir {cfg.data_dir!r} is not an existing folder")
    prefix = f"clusterbench-data-rank{ctx.rank}-"
    with tempfile.TemporaryDirectory(prefix=prefix, dir=cfg.data_dir or None) as root:
        for name in cfg.datasets:
            workload, dataset, batch_size = _prepare(name, cfg=cfg, ctx=ctx, root=Path(root))
            yield from measure_input(
                ctx,
                cfg,
                dataset_name=name,
                dataset=dataset,
                workload=workload,
                settings=settings,
                batch_size=batch_size,
            )
            del workload, dataset
            if ctx.is_cuda:
                torch.cuda.empty_cache()


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
    """Every combination to time; worker counts capped by ``cores``, pinning only on CUDA."""
    workers = sorted({min(n, cores) for n in cfg.num_workers})
    pins = sorted({p and device.type == "cuda" for p in cfg.pin_memory})
    out = []
    for n in workers:
        for pin in pins:
            for pf in sorted(set(cfg.prefetch_factor)) if n > 0 else [None]:
                out.append(LoaderSetting(num_workers=n, pin_memory=pin, prefetch_factor=pf))
    return out


def measure_input(
    ctx: DistContext,
    cfg: DataloaderConfig,
    *,
    dataset_name: DatasetName,
    dataset: Dataset[Batch],
    workload: Workload,
    settings: list[LoaderSetting],
    batch_size: int,
) -> Iterator[Measurement]:
    """Loader sweep, step rate alone, then the busy fraction at the best and default settings."""
    rates: dict[LoaderSetting, float] = {}
    for s in settings:
        rate, stats = loader_rate(dataset, setting=s, batch_size=batch_size, device=ctx.device,
                                  warmup_batches=cfg.warmup_batches,
                                  measure_batches=cfg.measure_batches)  # fmt: skip
        rates[s] = rate
        params = {"dataset": dataset_name, **s.params(), "batch_size": batch_size}
        yield ctx.measurement(DataloaderMetrics.loader_samples_per_s, value=rate, params=params,
                              stats=stats)  # fmt: skip
        ctx.progress.advance()
    step = make_train_step(workload, precision=cfg.precision)
    step_rate = _step_rate(ctx, cfg, step=step, dataset=dataset, batch_size=batch_size)
    yield ctx.measurement(
        DataloaderMetrics.step_samples_per_s, value=step_rate.median,
        params={"model": workload.name, "batch_size": batch_size, "dataset": dataset_name},
        stats=step_rate,
    )  # fmt: skip
    ctx.progress.advance()
    best = max(rates, key=rates.__getitem__)
    # the best setting, and PyTorch's defaults as the baseline (once if they are the best)
    choices = (
        {"best": best} if best == DEFAULT_SETTING else {"best": best, "default": DEFAULT_SETTING}
    )
    for choice, s in choices.items():
        busy, stats = gpu_busy(dataset, step=step, t_step_s=batch_size / step_rate.median,
                               setting=s, batch_size=batch_size, device=ctx.device,
                               warmup_steps=cfg.warmup_batches, steps=cfg.train_steps)  # fmt: skip
        params = {"dataset": dataset_name, **s.params(), "choice": choice}
        yield ctx.measurement(DataloaderMetrics.gpu_busy, value=busy, params=params, stats=stats)
        ctx.progress.advance()


def _step_rate(
    ctx: DistContext,
    cfg: DataloaderConfig,
    *,
    step: Trainer,
    dataset: Dataset[Batch],
    batch_size: int,
) -> Stats:
    """Samples/s of the training step alone, on a batch of the dataset already on the device."""
    x, y = _first_batch(dataset, batch_size=batch_size, device=ctx.device)
    samples = time_op(lambda: step.step([(x, y)]), device=ctx.device, warmup=_STEP_WARMUP,
                      repeats=cfg.measure_batches)  # fmt: skip
    # samples/s = batch_size / t_step
    return rate_stats(samples, work=batch_size, scale=1.0)


def _make_loader(
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
    )


def _to_device(batch: Batch, *, device: torch.device, non_blocking: bool) -> Batch:
    x, y = batch
    return x.to(device, non_blocking=non_blocking), y.to(device, non_blocking=non_blocking)


def _first_batch(dataset: Dataset[Batch], *, batch_size: int, device: torch.device) -> Batch:
    loader = _make_loader(dataset, setting=DEFAULT_SETTING, batch_size=batch_size, num_batches=1)
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
    loader = _make_loader(dataset, setting=setting, batch_size=batch_size, num_batches=total)
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
    step: Trainer,
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
    loader = _make_loader(
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
