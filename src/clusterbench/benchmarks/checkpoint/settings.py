"""Settings and metrics of the ``checkpoint`` benchmark, without torch (the CLI, analysis and
the report read them); its measurement is :mod:`.measure`."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from clusterbench.benchmarks.dataloader.kinds import WorkloadName
from clusterbench.metrics import Metric, MetricSet
from clusterbench.suites import check_suite

if TYPE_CHECKING:
    from typing import Self

__all__ = ["FORMATS", "STATES", "CheckpointConfig", "CheckpointMetrics", "Format"]

Format = Literal["torch", "safetensors", "dcp", "dcp_async"]
FORMATS: tuple[Format, ...] = typing.get_args(Format)
STATES = ("weights+optimizer", "weights")
"""What a predicted checkpoint holds: the model and its optimizer state, or the weights alone."""


class CheckpointMetrics(MetricSet, benchmark="checkpoint"):
    save_gbps = Metric("GB/s", "higher", "checkpoint bytes / save time, made durable (fsync)")
    load_gbps = Metric("GB/s", "higher", "checkpoint bytes / load time, from the storage")
    save_s = Metric("s", "lower", "time of one save, made durable (fsync)")
    load_s = Metric("s", "lower", "time of one load, page cache dropped before it")
    async_block_s = Metric("s", "lower", "time dcp.async_save blocks training (staging)")
    async_total_s = Metric(
        "s", "lower", "time from dcp.async_save's call until its files are written"
    )
    async_stall_pct = Metric(
        "%", "none", "how much slower training steps run while an async save writes"
    )
    free_space_gb = Metric("GB", "none", "free space of the folder checkpoints are written to")
    fit_gbps = Metric("GB/s", "higher", "β of t = α + S/β fitted over the sizes measured")
    fit_latency_s = Metric(
        "s", "lower", "α of t = α + S/β: the fixed seconds of one operation",
        only_when="two or more sizes measured",
    )  # fmt: skip
    fit_error_pct = Metric(
        "%", "none", "error of the fit on the smaller sizes at the largest one (held out)",
        only_when="three or more sizes measured",
    )  # fmt: skip
    predicted_s = Metric(
        "s", "lower", "seconds for a model's checkpoint: α + N·B/β (docs/reference.md)"
    )


@dataclass(kw_only=True, slots=True)
class CheckpointConfig:
    """Settings of the ``checkpoint`` benchmark."""

    model: WorkloadName = "1.3b"
    """Workload preset whose state is saved (a ``training`` preset, or 'small_cnn')."""
    formats: list[Format] = field(default_factory=lambda: list(FORMATS))
    """torch, safetensors, dcp (sharded, synchronous), dcp_async."""
    directory: str = ""
    """Existing folder to write under ('' = the node's temp dir); a shared filesystem here
    measures it.  Several nodes need a shared folder (DCP's ranks read each other's files)."""
    max_bytes: int = 2 * 2**30
    """Most bytes a format writes at once: the first whole parameters of the state, each with
    its optimizer state, up to this; 0 = the whole state (the full-size save)."""
    num_sizes: int = 3
    """State sizes per format, each half the next: the fit t = α + S/β needs 2; from 3 the
    smaller ones also predict the largest (the fit's held-out error); 1 = the largest alone."""
    warmup: int = 1
    """Untimed rounds per format, at its smallest size: the first call of a format pays for
    imports, allocations and thread pools that later ones do not."""
    repeats: int = 5
    """Most saves and loads per size and format (fewer once their spread is small)."""
    min_repeats: int = 2
    """Fewest saves and loads per size and format."""
    target_cv: float = 0.05
    """Stop repeating a size once its save and load times vary by at most this (stdev/mean)."""
    predict_params_b: list[float] = field(default_factory=lambda: [7.0, 70.0])
    """Model sizes, in billions of parameters, whose checkpoint times are predicted (besides
    the workload's own)."""
    stall_steps: int = 5
    """Training steps timed with and without an async save running."""
    batch_size: int = 1
    """Samples per training step."""
    num_checked: int = 8
    """Tensors compared after each load (evenly spread over the state)."""

    def __post_init__(self) -> None:
        if not self.formats:
            raise ValueError("formats must not be empty")
        for name in ("repeats", "min_repeats", "num_sizes", "stall_steps", "batch_size",
                     "num_checked"):  # fmt: skip
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")
        if self.max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0 (0 = the whole state), got {self.max_bytes}")
        if self.target_cv < 0:
            raise ValueError(f"target_cv must be >= 0, got {self.target_cv}")
        if any(b <= 0 for b in self.predict_params_b):
            raise ValueError(f"predict_params_b must be > 0, got {self.predict_params_b}")

    @classmethod
    def preset(cls, *, suite: str, device_type: str) -> Self:
        """Settings of ``suite`` (quick, standard, full) on ``device_type`` (cuda, cpu)."""
        check_suite(suite, device_type)
        if device_type == "cpu":
            # a 2 MB state: latency-bound, its spread rarely small; 3 rounds at most per size
            return cls(model="tiny", repeats=3, stall_steps=3)
        if suite == "quick":
            return cls(model="125m", max_bytes=2**30, repeats=3)
        if suite == "full":  # the real full-size save of the 1.3b state (15.9 GiB), and half
            return cls(model="1.3b", max_bytes=0, num_sizes=2, repeats=2)
        # 3 rounds at most a size: on the H200's disk a save's spread stayed 15-19% in 5
        # rounds (2026-12-02), so more rounds bought time, not a stop
        return cls(model="1.3b", repeats=3)
