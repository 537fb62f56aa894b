"""Settings and metrics of the ``dataloader`` benchmark: no torch (the CLI, analysis and the report
read them); its measurement is :mod:`.measure`."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from clusterbench.benchmarks.dataloader.kinds import (
    ImageFormat,
    SmallCnn,
    StepPrecision,
)
from clusterbench.benchmarks.sweep_stop import PlateauRule
from clusterbench.declared.dataloader import DataloaderMetrics
from clusterbench.model_shapes import DecoderModel, VisionModel
from clusterbench.suites import check_suite

if TYPE_CHECKING:
    from typing import Self


__all__ = ["DATASETS", "DataloaderConfig", "DataloaderMetrics", "DatasetName", "ImageModel"]

DatasetName = Literal["images", "tokens"]
DATASETS: tuple[DatasetName, ...] = typing.get_args(DatasetName)
ImageModel = Literal[VisionModel, SmallCnn]
"""The classifiers the images can feed: the torchvision presets and the CPU-sized one."""


# fmt: off
_PRESETS: dict[str, dict[str, Any]] = {
    "cpu": dict(vision_model="small_cnn", model="tiny", num_samples=64, image_size=64,
                batch_size=8, token_batch_size=4, num_workers=[0, 2], pin_memory=[False],
                prefetch_factor=[2], warmup_batches=2, measure_batches=6, train_steps=6,
                precision="fp32"),
    "quick": dict(num_samples=1024, num_workers=[0, 4, 8], prefetch_factor=[2],
                  measure_batches=16, train_steps=12),
    "full": dict(num_samples=4096, prefetch_factor=[2, 4, 8], measure_batches=48,
                 train_steps=40, sweep_stop=False),
}  # "standard" on CUDA: the field defaults (worker counts 0, 1, 2, 4, ... up to the cores)
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
    num_workers: list[int] = field(default_factory=list)
    """Worker counts to sweep, capped by the CPU cores of one rank (the cores per GPU); empty:
    0, 1, 2, 4, ... doubling up to those cores."""
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
    step_s: float = 0.0
    """Seconds one training step is made to take (0: the workload's step as it runs here): the
    step runs, then the rank waits out the rest, to size the loader for a known step time."""
    sweep_stop: bool = True
    """Stop the worker sweep once it has its answer: the loader delivers ``sufficient_margin``
    x what the step consumes, or the curve flattens (``plateau_*``); False: every count."""
    sufficient_margin: float = 1.5
    """The loader is sufficient at this multiple of the samples/s the step consumes."""
    plateau_tolerance: float = 0.10
    """A worker count adding less than this fraction to the best samples/s before it is flat."""
    plateau_patience: int = 2
    """Flat worker counts in a row that end the sweep."""

    def __post_init__(self) -> None:
        if not self.datasets or not self.pin_memory:
            raise ValueError("datasets and pin_memory must not be empty")
        if min(self.num_workers, default=0) < 0 or min(self.prefetch_factor, default=1) < 1:
            raise ValueError("num_workers must be >= 0 and prefetch_factor >= 1")
        if self.warmup_batches < 1:
            raise ValueError(f"warmup_batches must be >= 1, got {self.warmup_batches}")
        for name in ("num_samples", "image_size", "batch_size", "token_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.measure_batches < 1 or self.train_steps < 1 or self.seq_len < 0:
            raise ValueError("measure_batches and train_steps must be >= 1, seq_len >= 0")
        if self.step_s < 0 or self.sufficient_margin <= 0:
            raise ValueError("step_s must be >= 0 and sufficient_margin > 0")
        self.plateau()  # checks plateau_tolerance and plateau_patience

    def plateau(self) -> PlateauRule:
        """The flattening rule of the worker sweep."""
        return PlateauRule(tolerance=self.plateau_tolerance, patience=self.plateau_patience)

    @classmethod
    def preset(cls, *, suite: str, device_type: str) -> Self:
        """Settings of ``suite`` (quick, standard, full) on ``device_type`` (cuda, cpu)."""
        check_suite(suite, device_type)
        key = "cpu" if device_type == "cpu" else suite
        return cls(**_PRESETS.get(key, {}))
