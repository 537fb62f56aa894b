"""Settings and metrics of the ``gemm`` benchmark (no torch: analysis, report and the CLI read
them; the measurement is :mod:`.measure`)."""

from __future__ import annotations

import math
import re
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from clusterbench.benchmarks.sweep_stop import PlateauRule
from clusterbench.metrics import Metric, MetricSet
from clusterbench.suites import check_suite

if TYPE_CHECKING:
    from typing import Self

__all__ = [
    "DTYPES",
    "TOLERANCE",
    "Dtype",
    "GemmConfig",
    "GemmMetrics",
    "check_shape_lists",
    "parse_shape",
]

Dtype = Literal["fp32", "tf32", "fp16", "bf16", "fp8"]
DTYPES: tuple[Dtype, ...] = typing.get_args(Dtype)
# Largest accepted ||out - ref|| / ||ref|| against a float64 product of the same inputs.  Where the
# error comes from: fp32, K-term fp32 sums; tf32, inputs rounded to 10 mantissa bits; fp16 / bf16,
# the output rounded to 10 / 7 bits; fp8, the bf16 output and Hopper's reduced-precision fast
# accumulation (the inputs are exact: the reference uses the dequantized fp8 values).  Measured
# on an H200 (2026-11, shapes 4k-8k): fp32 1.6e-6, tf32 2.9e-4, fp16 2.1e-4, bf16 1.7e-3, fp8
# 3.5e-3; each bound leaves >= 6x headroom yet stays far below the ~1 that a wrong layout, scale
# or unwritten output gives.
TOLERANCE = {"fp32": 1e-4, "tf32": 5e-3, "fp16": 1e-2, "bf16": 1e-2, "fp8": 5e-2}
_SHAPE_RE = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*[xX]\s*(\d+)\s*$")


class GemmMetrics(MetricSet, benchmark="gemm"):
    tflops = Metric("TFLOP/s", "higher", "median throughput of one dtype and shape")
    tflops_best = Metric("TFLOP/s", "higher", "the best shape's row of one dtype")
    tflops_geomean = Metric("TFLOP/s", "higher", "geometric mean over one dtype's shapes")
    # judged against its tolerance, never against peers
    rel_error = Metric("ratio", "none", "worst ||out - ref|| / ||ref|| of one dtype's shapes")


def check_shape_lists(dtypes: Sequence[str], shape_lists: Iterable[Sequence[str]]) -> None:
    """ValueError unless there are dtypes and every shape list is a non-empty list of MxNxK."""
    if not dtypes:
        raise ValueError("dtypes must not be empty")
    for each in shape_lists:
        if not each:
            raise ValueError("a shape list must not be empty")
        for shape in each:
            parse_shape(shape)


def parse_shape(text: str) -> tuple[int, int, int]:
    """``"MxNxK"`` -> ``(M, N, K)``; ValueError on anything else or a non-positive size."""
    match = _SHAPE_RE.match(text)
    if match is None:
        raise ValueError(f"bad GEMM shape {text!r}: expected 'MxNxK', e.g. '8192x8192x8192'")
    m, n, k = (int(g) for g in match.groups())
    if min(m, n, k) <= 0:
        raise ValueError(f"bad GEMM shape {text!r}: sizes must be positive")
    return m, n, k


def _cubes(*sizes: int) -> list[str]:
    return [f"{s}x{s}x{s}" for s in sizes]


# GPU sweeps.  Quick keeps the shapes that ran fastest in bf16 and fp8 in an exploratory sweep
# on an H200 (cubes of 4096-8192 and a few long-K shapes; M or N = 16384 was slower); the
# recorded best-shape figures are in docs/results/H200.md.  Full is {4k, 8k, 16k}^3, the 27
# shapes of docs/reference.md's baseline sweep.
_GPU_QUICK = [
    *_cubes(4096, 6144, 8192),
    "4096x4096x16384",
    "6144x6144x12288",
    "4096x8192x16384",
]
_GPU_STANDARD = [
    *_GPU_QUICK,
    *_cubes(12288, 16384),
    "4096x4096x8192",
    "8192x4096x16384",
    "8192x8192x16384",
    "16384x8192x8192",
]
_GPU_FULL = [
    f"{m}x{n}x{k}"
    for m in (4096, 8192, 16384)
    for n in (4096, 8192, 16384)
    for k in (4096, 8192, 16384)
]


@dataclass(kw_only=True, slots=True)
class GemmConfig:
    """Settings of the ``gemm`` benchmark."""

    dtypes: list[Dtype] = field(default_factory=lambda: ["bf16"])
    """Dtypes to time: fp32 (TF32 off), tf32, fp16, bf16, fp8 (e4m3, CUDA sm_89+ only)."""
    shapes: list[str] = field(default_factory=lambda: ["4096x4096x4096"])
    """Shapes 'MxNxK': (M x K) @ (K x N) -> (M x N)."""
    shapes_by_dtype: dict[Dtype, list[str]] = field(default_factory=dict)
    """Shapes for particular dtypes, replacing ``shapes`` for them (e.g. fewer for slow fp32)."""
    warmup: int = 5
    """Untimed products before each shape's timed repeats."""
    warmup_min_s: float = 0.0
    """Keep warming up each shape at least this long. 0 (default) times short bursts, as
    mamf-finder does; a longer warm-up measures the sustained rate, which on an H200 pushes
    the GPU into its power cap (see docs/results/H200.md)."""
    repeats: int = 20
    """Timed products per shape; the median is reported."""
    fp8_fast_accum: bool = True
    """fp8: let the tensor cores accumulate in reduced precision (as fp8 training recipes do)."""
    sweep_stop: bool = True
    """Run each dtype's shapes smallest work first and stop at the plateau (``plateau_*``);
    False: every shape, in the order given (the full suite)."""
    plateau_tolerance: float = 0.02
    """A shape adding less than this fraction to the best TFLOP/s before it is flat."""
    plateau_patience: int = 3
    """Flat shapes in a row that end a dtype's sweep."""

    def __post_init__(self) -> None:
        check_shape_lists(self.dtypes, [self.shapes, *self.shapes_by_dtype.values()])
        self.plateau()  # checks plateau_tolerance and plateau_patience
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats}")
        if self.warmup_min_s < 0:
            raise ValueError(f"warmup_min_s must be >= 0, got {self.warmup_min_s}")

    def shapes_for(self, dtype: Dtype) -> list[tuple[int, int, int]]:
        """The shapes of ``dtype`` in sweep order: by work (M*N*K) with ``sweep_stop``."""
        shapes = [parse_shape(s) for s in self.shapes_by_dtype.get(dtype, self.shapes)]
        return sorted(shapes, key=math.prod) if self.sweep_stop else shapes

    def plateau(self) -> PlateauRule:
        """The rule that ends a dtype's sweep."""
        return PlateauRule(tolerance=self.plateau_tolerance, patience=self.plateau_patience)

    @classmethod
    def preset(cls, *, suite: str, device_type: str) -> Self:
        """Settings of ``suite`` (quick, standard, full) on ``device_type`` (cuda, cpu)."""
        check_suite(suite, device_type)
        if device_type == "cpu":
            sizes = {"quick": (256, 512), "standard": (256, 512, 768), "full": (256, 512, 1024)}
            return cls(dtypes=["fp32", "bf16"], shapes=_cubes(*sizes[suite]), warmup=1, repeats=3,
                       sweep_stop=suite != "full")  # fmt: skip
        if suite == "quick":
            return cls(
                dtypes=["bf16", "fp8", "fp16", "tf32", "fp32"],
                shapes=_GPU_QUICK,
                shapes_by_dtype={
                    "fp16": _cubes(4096, 8192),
                    "tf32": _cubes(4096, 8192),
                    "fp32": _cubes(8192),
                },
                warmup=10,
                repeats=25,
            )
        shapes = _GPU_STANDARD if suite == "standard" else _GPU_FULL
        return cls(
            dtypes=list(DTYPES),
            shapes=shapes,
            shapes_by_dtype={"fp32": _cubes(4096, 8192)},
            warmup=10,
            repeats=30 if suite == "standard" else 50,
            sweep_stop=suite == "standard",
        )
