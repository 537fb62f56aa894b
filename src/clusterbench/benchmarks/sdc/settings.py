"""Settings and metrics of the ``sdc`` benchmark: no torch (the CLI, analysis and the report
read them); its measurement is :mod:`.measure`."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from clusterbench.benchmarks.gemm import check_shape_lists, parse_shape
from clusterbench.metrics import Metric, MetricSet
from clusterbench.suites import check_suite

if TYPE_CHECKING:
    from typing import Self

__all__ = [
    "SDC_DTYPES",
    "Case",
    "SdcConfig",
    "SdcDtype",
    "SdcMetrics",
]

SdcDtype = Literal["fp32", "bf16", "fp16"]
SDC_DTYPES: tuple[SdcDtype, ...] = typing.get_args(SdcDtype)
_ONLY_WHEN_DIFFERENT = "a result differed from its reference"


@dataclass(frozen=True, slots=True)
class Case:
    """One GEMM chain the check runs: a dtype and the shape of its first product."""

    dtype: str
    m: int
    n: int
    k: int
    depth: int

    @property
    def label(self) -> str:
        return f"{self.dtype} {self.m}x{self.n}x{self.k}"

    @property
    def out_shape(self) -> tuple[int, int]:
        """(M x N) after an odd number of products, (M x K) after an even one."""
        return (self.m, self.n) if self.depth % 2 else (self.m, self.k)


class SdcMetrics(MetricSet, benchmark="sdc"):
    # counts, judged by the vote in analysis, never against peers
    mismatches = Metric(
        "count", "none", "repeats of one case whose result differs from its group's reference"
    )
    unstable_repeats = Metric(
        "count", "none", "repeats of one case whose result differs from the device's own others"
    )
    diff_elements = Metric(
        "count", "none", "elements of the worst differing result", only_when=_ONLY_WHEN_DIFFERENT
    )
    max_abs_diff = Metric(
        "value", "none", "largest |result - reference| element", only_when=_ONLY_WHEN_DIFFERENT
    )
    checked = Metric("count", "none", "results hashed and compared on the device")
    seconds = Metric("s", "lower", "wall time of the check on the device (hashing on the host)")


@dataclass(kw_only=True, slots=True)
class SdcConfig:
    """Settings of the ``sdc`` benchmark."""

    dtypes: list[SdcDtype] = field(default_factory=lambda: ["fp32"])
    """Dtypes to check: fp32 (TF32 off), bf16, fp16."""
    shapes: list[str] = field(default_factory=lambda: ["256x256x256"])
    """Shapes 'MxNxK' of each chain's first product, (M x K) @ (K x N); the next multiplies
    that (M x N) result by an (N x K) matrix, the one after by the first (K x N) again."""
    shapes_by_dtype: dict[SdcDtype, list[str]] = field(default_factory=dict)
    """Shapes for particular dtypes, replacing ``shapes`` for them."""
    depth: int = 4
    """GEMMs chained, each on the previous one's output."""
    repeats: int = 5
    """Runs of each chain on every device; every one must give the same bits."""
    seed: int = 20260
    """Seed of the inputs (the same on every rank)."""
    plant_flip_rank: int = -1
    """Test hook: this rank flips one bit of one element of each result (-1: none)."""
    plant_flip_repeat: int = -1
    """The repeat the planted flip spoils (-1: every repeat, so the rank disagrees with its
    peers; one repeat: its own repeats disagree)."""

    def __post_init__(self) -> None:
        check_shape_lists(self.dtypes, [self.shapes, *self.shapes_by_dtype.values()])
        if self.depth < 1:
            raise ValueError(f"depth must be >= 1, got {self.depth}")
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats}")
        if self.plant_flip_rank < -1:
            raise ValueError(
                f"plant_flip_rank must be a rank or -1 (none), got {self.plant_flip_rank}"
            )
        if not -1 <= self.plant_flip_repeat < self.repeats:
            raise ValueError(
                f"plant_flip_repeat must be -1 (every repeat) or a repeat below repeats "
                f"({self.repeats}), got {self.plant_flip_repeat}"
            )

    def cases(self) -> list[Case]:
        return [
            Case(dtype, *parse_shape(s), depth=self.depth)
            for dtype in self.dtypes
            for s in self.shapes_by_dtype.get(dtype, self.shapes)
        ]

    @classmethod
    def preset(cls, *, suite: str, device_type: str) -> Self:
        """Settings of ``suite`` (quick, standard, full) on ``device_type`` (cuda, cpu).  On two
        CPU workers of a 2-core machine the check took 0.04 s (quick) and 0.2 s (standard, full);
        on GPUs the host's hashing of the results outweighs the products (a 4096 cube is
        0.14 TFLOP, 0.14 ms at an H200's 989 TFLOP/s dense bf16 peak)."""
        check_suite(suite, device_type)
        if device_type == "cpu":
            if suite == "quick":
                return cls(dtypes=["fp32"], shapes=["256x256x256"])
            return cls(dtypes=["fp32", "bf16"], shapes=["256x256x256", "384x128x256"])
        # Tensor-core sizes: a 4096 cube and a flat, long-K shape (another kernel and split).
        shapes = ["4096x4096x4096", "8192x2048x4096"]
        if suite == "quick":
            return cls(dtypes=["bf16", "fp32"], shapes=shapes,
                       shapes_by_dtype={"fp32": ["2048x2048x2048"]})  # fmt: skip
        return cls(
            dtypes=["bf16", "fp16", "fp32"],
            shapes=[*shapes, "8192x8192x8192"],
            shapes_by_dtype={"fp32": ["2048x2048x2048", "4096x4096x4096"]},
            repeats=8 if suite == "standard" else 20,
            depth=4 if suite == "standard" else 8,
        )
