"""Level-1 benchmarks (gemm, memory) on the CPU, called directly: no process group needed."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
import torch

from clusterbench.benchmarks.gemm import TOLERANCE, GemmConfig, parse_shape
from clusterbench.benchmarks.gemm import measure as gemm_mod
from clusterbench.benchmarks.gemm.measure import gemm
from clusterbench.benchmarks.memory import MemoryConfig
from clusterbench.benchmarks.memory import measure as memory_mod
from clusterbench.benchmarks.memory.measure import memory
from clusterbench.benchmarks.transfer import TransferConfig
from clusterbench.config import ConfigError, build_run_config
from clusterbench.registry import get
from clusterbench.runtime.dist import DistContext
from clusterbench.schema import Measurement
from tests.helpers import one_rank_ctx

SUITES = ("quick", "standard", "full")
DEVICE_TYPES = ("cuda", "cpu")


class RecordingProgress:
    def __init__(self) -> None:
        self.total: float | None = None
        self.done = 0.0

    def start(self, total: float) -> None:
        self.total = total

    def advance(self, amount: float = 1.0) -> None:
        self.done += amount


def cpu_ctx(benchmark: str) -> DistContext:
    return one_rank_ctx(benchmark, progress=RecordingProgress())


def by_metric(ms: Iterable[Measurement], metric: str, **params: object) -> list[Measurement]:
    return [
        m for m in ms if m.metric == metric and all(m.params.get(k) == v for k, v in params.items())
    ]


SHAPES = ["64x48x32", "96x80x128"]


@pytest.fixture(scope="module")
def gemm_results() -> tuple[DistContext, list[Measurement]]:
    ctx = cpu_ctx("gemm")
    cfg = GemmConfig(dtypes=["fp32", "bf16", "fp8"], shapes=SHAPES, warmup=1, repeats=3)
    return ctx, list(gemm(ctx, cfg))


def test_gemm_per_shape_measurements(gemm_results: tuple[DistContext, list[Measurement]]) -> None:
    _, ms = gemm_results
    for dtype in ("fp32", "bf16"):
        rows = by_metric(ms, "tflops", dtype=dtype)
        assert sorted((m.params["m"], m.params["n"], m.params["k"]) for m in rows) == sorted(
            parse_shape(s) for s in SHAPES
        )
        for m in rows:
            assert m.unit == "TFLOP/s" and m.benchmark == "gemm" and m.device == "cpu:0"
            assert m.stats is not None and m.stats.samples == 3
            assert m.value == m.stats.median > 0
            assert m.stats.min <= m.stats.median <= m.stats.max
            assert m.reference is None  # no GPU spec on the CPU


def test_gemm_summaries(gemm_results: tuple[DistContext, list[Measurement]]) -> None:
    _, ms = gemm_results
    for dtype in ("fp32", "bf16"):
        medians = {
            (m.params["m"], m.params["n"], m.params["k"]): m.value
            for m in by_metric(ms, "tflops", dtype=dtype)
        }
        (best,) = by_metric(ms, "tflops_best", dtype=dtype)
        assert best.value == max(medians.values())
        assert medians[(best.params["m"], best.params["n"], best.params["k"])] == best.value
        (geo,) = by_metric(ms, "tflops_geomean", dtype=dtype)
        expected = math.exp(sum(math.log(v) for v in medians.values()) / len(medians))
        assert geo.value == pytest.approx(expected)
        assert geo.params == {"dtype": dtype, "num_shapes": len(SHAPES)}
        assert min(medians.values()) <= geo.value <= max(medians.values())


def test_gemm_rel_error_below_tolerance(
    gemm_results: tuple[DistContext, list[Measurement]],
) -> None:
    _, ms = gemm_results
    for dtype in ("fp32", "bf16"):
        (err,) = by_metric(ms, "rel_error", dtype=dtype)
        assert err.unit == "ratio"
        assert err.params["tolerance"] == TOLERANCE[dtype]
        assert 0 <= err.value < TOLERANCE[dtype]
    # bf16 rounds its output to 8 significant bits, fp32 to 24: their errors must differ so
    assert by_metric(ms, "rel_error", dtype="bf16")[0].value > 1e-4
    assert by_metric(ms, "rel_error", dtype="fp32")[0].value < 1e-5


def test_gemm_skips_fp8_on_cpu_and_drives_progress(
    gemm_results: tuple[DistContext, list[Measurement]],
) -> None:
    ctx, ms = gemm_results
    assert not [m for m in ms if m.params.get("dtype") == "fp8"]
    progress = ctx.progress
    assert isinstance(progress, RecordingProgress)
    assert progress.total == progress.done == 2 * len(SHAPES)


def test_gemm_tflops_is_flops_over_median_time(monkeypatch: pytest.MonkeyPatch) -> None:
    times_s = [0.004, 0.001, 0.002]
    monkeypatch.setattr(gemm_mod, "time_op", lambda *a, **kw: list(times_s))
    cfg = GemmConfig(dtypes=["fp32"], shapes=["64x32x16"], warmup=0, repeats=3)
    (row,) = by_metric(gemm(cpu_ctx("gemm"), cfg), "tflops")
    # TFLOP/s = 2*M*N*K / t / 1e12, median over repeats
    assert row.value == pytest.approx(2 * 64 * 32 * 16 / 0.002 / 1e12)
    assert row.stats is not None
    assert row.stats.max == pytest.approx(2 * 64 * 32 * 16 / 0.001 / 1e12)


def test_gemm_wrong_product_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    real_mm = torch.mm

    def wrong_mm(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
        real_mm(a, b, out=out)
        if out.dtype == torch.float32:
            out.mul_(1.01)  # 1% off: 100x fp32's tolerance
        return out

    monkeypatch.setattr(torch, "mm", wrong_mm)
    cfg = GemmConfig(dtypes=["fp32", "bf16"], shapes=["32x32x32"], warmup=0, repeats=1)
    seen: list[Measurement] = []
    with pytest.raises(RuntimeError, match="fp32"):
        for m in gemm(cpu_ctx("gemm"), cfg):
            seen.append(m)
    (err,) = by_metric(seen, "rel_error", dtype="fp32")
    assert err.value == pytest.approx(0.01, rel=0.05)
    assert not by_metric(seen, "tflops", dtype="fp32")  # not timed
    assert by_metric(seen, "tflops", dtype="bf16")  # the other dtype still ran


def test_memory_cpu() -> None:
    ctx = cpu_ctx("memory")
    size = 8 * 2**20
    cfg = MemoryConfig(ops=["copy", "read", "write"], size_bytes=size, warmup=1, repeats=3)
    ms = list(memory(ctx, cfg))
    assert [m.params["op"] for m in ms] == ["copy", "read", "write"]
    for m in ms:
        assert (m.metric, m.unit, m.params["size_bytes"]) == ("bandwidth", "GB/s", size)
        assert m.stats is not None and m.stats.samples == 3
        assert m.value == m.stats.median > 0
    assert isinstance(ctx.progress, RecordingProgress)
    assert ctx.progress.total == ctx.progress.done == 3


def test_memory_counts_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_time_op(fn: Callable[[], object], **kwargs: object) -> list[float]:
        fn()  # the write check needs the fill to have run
        return [0.5, 1.0, 2.0]

    monkeypatch.setattr(memory_mod, "time_op", fake_time_op)
    size = 4 * 2**20
    cfg = MemoryConfig(ops=["copy", "read", "write"], size_bytes=size, warmup=0, repeats=3)
    got = {m.params["op"]: m.value for m in memory(cpu_ctx("memory"), cfg)}
    # GB/s = bytes / t / 1e9, median t = 1 s; a copy reads and writes its buffer
    assert got == pytest.approx({"copy": 2 * size / 1e9, "read": size / 1e9, "write": size / 1e9})


@pytest.mark.parametrize(
    ("cls", "kwargs"),
    [
        (GemmConfig, {"shapes": ["12x"]}),
        (GemmConfig, {"shapes": ["0x16x16"]}),
        (GemmConfig, {"shapes": ["16x-4x16"]}),
        (GemmConfig, {"shapes": []}),
        (GemmConfig, {"dtypes": []}),
        (GemmConfig, {"shapes_by_dtype": {"bf16": ["8x8"]}}),
        (GemmConfig, {"repeats": 0}),
        (GemmConfig, {"warmup": -1}),
        (MemoryConfig, {"size_bytes": 0}),
        (MemoryConfig, {"size_bytes": -4}),
        (MemoryConfig, {"size_bytes": 6}),
        (MemoryConfig, {"ops": []}),
        (MemoryConfig, {"repeats": 0}),
        (TransferConfig, {"pinned_size_bytes": 0}),
        (TransferConfig, {"pageable_size_bytes": -1}),
        (TransferConfig, {"p2p_size_bytes": 0}),
        (TransferConfig, {"directions": []}),
        (TransferConfig, {"memory": []}),
        (TransferConfig, {"repeats": 0}),
    ],
)
def test_bad_settings_raise(cls: type, kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        cls(**kwargs)


@pytest.mark.parametrize(
    ("setting", "bad"),
    [
        ("gemm.dtypes=bf16,fp64", "fp64"),
        ("memory.ops=copy,triad", "triad"),
        ("transfer.directions=sideways", "sideways"),
        ("transfer.memory=managed", "managed"),
    ],
)
def test_unknown_choices_are_refused_by_config(setting: str, bad: str) -> None:
    # Choices are Literal types: config validates them by the settings' type hints.
    benchmark = setting.split(".")[0]
    with pytest.raises(ConfigError, match="input should be") as exc:
        build_run_config(device_type="cuda", only=[benchmark], sets=[setting])
    assert setting.split("=")[0] in str(exc.value) and bad in str(exc.value)


def test_unknown_dtype_in_shapes_by_dtype_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[gemm]\nshapes_by_dtype = { int8 = ["8x8x8"] }\n')
    with pytest.raises(ConfigError, match=r"gemm\.shapes_by_dtype") as exc:
        build_run_config(device_type="cuda", only=["gemm"], config_file=path)
    assert "'bf16'" in str(exc.value) and "int8" in str(exc.value)


def test_parse_shape() -> None:
    assert parse_shape("8192x4096X1024") == (8192, 4096, 1024)
    assert parse_shape(" 1 x 2 x 3 ") == (1, 2, 3)


@pytest.mark.parametrize("cls", [GemmConfig, MemoryConfig, TransferConfig])
@pytest.mark.parametrize("suite", SUITES)
@pytest.mark.parametrize("device_type", DEVICE_TYPES)
def test_presets_are_valid(cls: Any, suite: str, device_type: str) -> None:
    cfg = cls.preset(suite=suite, device_type=device_type)
    assert isinstance(cfg, cls)
    cls(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)})  # passes the checks


def test_gemm_presets() -> None:
    quick = GemmConfig.preset(suite="quick", device_type="cuda")
    assert {"bf16", "fp8"} <= set(quick.dtypes)
    assert (8192, 8192, 8192) in quick.shapes_for("bf16")
    assert quick.shapes_for("fp32") == [(8192, 8192, 8192)]
    assert len(GemmConfig.preset(suite="full", device_type="cuda").shapes_for("bf16")) == 27
    cpu = GemmConfig.preset(suite="quick", device_type="cpu")
    assert set(cpu.dtypes) == {"fp32", "bf16"}
    assert max(max(s) for s in cpu.shapes_for("bf16")) <= 512


@pytest.mark.parametrize("cls", [GemmConfig, MemoryConfig, TransferConfig])
def test_preset_rejects_unknown_names(cls: Any) -> None:
    with pytest.raises(ValueError):
        cls.preset(suite="huge", device_type="cuda")
    with pytest.raises(ValueError):
        cls.preset(suite="quick", device_type="tpu")


def test_registration() -> None:
    assert get("gemm").settings is GemmConfig
    assert (get("gemm").level, get("gemm").scope) == (1, "per_device")
    assert get("memory").supports("cpu") and get("memory").supports("cuda")
    assert not get("transfer").supports("cpu")
    assert get("transfer").supports("cuda")
