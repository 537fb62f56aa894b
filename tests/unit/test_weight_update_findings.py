"""weight_update's verdicts, summary section and figure on hand-built measurements: the share
of the memory benchmark's copy on each device, the threshold from both sides, no memory run,
fused against foreach inside and beyond the noise."""

from __future__ import annotations

import random
import re

import pytest

from clusterbench import catalog, registry
from clusterbench.benchmarks.memory import MemoryMetrics
from clusterbench.benchmarks.weight_update import WeightUpdateMetrics as W
from clusterbench.benchmarks.weight_update import figures as figures
from clusterbench.benchmarks.weight_update import findings as analysis
from clusterbench.benchmarks.weight_update import section as section
from clusterbench.benchmarks.weight_update.optimizers import OPTIMIZER_SPECS, bytes_per_param
from clusterbench.schema import Finding, Measurement, Reference, Results, Stats
from clusterbench.thresholds import Thresholds
from clusterbench.views.plots import PlotContext
from tests.unit.test_report_figures import check_figure, results_of, traces

SPEC = Reference(value=4800.0, kind="spec_peak", source="NVIDIA H200 datasheet")
NUM_PARAMS = 1_420_396_544


@pytest.fixture(autouse=True, scope="module")
def _registered() -> None:
    catalog.register_builtin()


def measurement(
    metric: str, value: float, *, device: str = "cuda:0", samples: list[float] | None = None,
    reference: Reference | None = None, unit: str = "GB/s", benchmark: str = "weight_update",
    **params: object,
) -> Measurement:  # fmt: skip
    stats = Stats.from_samples(samples) if samples else None
    return Measurement(
        benchmark=benchmark, metric=metric, value=value, unit=unit, params=params,  # type: ignore[arg-type]
        rank=int(device.split(":")[1]), host="node0", device=device, stats=stats,
        reference=reference,
    )  # fmt: skip


def copy(gbps: float, device: str = "cuda:0") -> Measurement:
    return measurement(
        MemoryMetrics.bandwidth.name, gbps, device=device, benchmark="memory", op="copy",
        size_bytes=4 * 2**30, reference=SPEC,
    )  # fmt: skip


def update(
    optimizer: str, gbps: float, *, layout: str = "fp16_master", device: str = "cuda:0",
    jitter: float = 0.01, seed: int = 0,
) -> list[Measurement]:  # fmt: skip
    """The three measurements of one optimizer and layout on one device: GB/s, the update time
    that gives it (10 repeats within ``jitter``) and the reference check."""
    family = OPTIMIZER_SPECS[optimizer].family  # type: ignore[index]
    per_param = bytes_per_param(family, layout)  # type: ignore[arg-type]
    ms = per_param * NUM_PARAMS / (gbps * 1e9) * 1e3
    rng = random.Random(seed)
    times = [ms * (1 + jitter * (rng.random() - 0.5)) for _ in range(10)]
    params = {"model": "1.3b", "optimizer": optimizer, "layout": layout,
              "num_params": NUM_PARAMS, "bytes_per_param": per_param}  # fmt: skip
    return [
        measurement(W.bandwidth.name, gbps, device=device, reference=SPEC, **params),
        measurement(
            W.step_time_ms.name, sorted(times)[4], device=device, samples=times, unit="ms", **params
        ),
        measurement(
            W.update_rel_error.name, 1e-5, device=device, unit="ratio", tolerance=1e-3, **params
        ),
    ]


def results(ms: list[Measurement], backend: str = "nccl") -> Results:
    return results_of(ms, num_nodes=1, backend=backend)


def of(findings: list[Finding], id_: str) -> list[Finding]:
    return [f for f in findings if f.id == id_]


def test_the_share_of_hbm_is_against_each_devices_own_copy() -> None:
    ms = [
        copy(4000.0, "cuda:0"), copy(3000.0, "cuda:1"),
        *update("adamw_fused", 3200.0, device="cuda:0"),  # 80% of its own 4000
        *update("adamw_fused", 2400.0, device="cuda:1"),  # 80% of its own 3000
        *update("adamw_foreach", 1200.0, device="cuda:0"),
        *update("adamw_foreach", 900.0, device="cuda:1"),
    ]  # fmt: skip
    found = analysis.findings(results(ms), Thresholds())
    (reach,) = of(found, "weight_update.hbm_fraction")
    assert reach.severity == "info"
    assert reach.message.startswith(
        "The weight update reaches 80% of HBM (the bottleneck-analysis paper saw"
    )
    assert "65% of theoretical HBM on H100" in reach.message
    assert "adamw_fused at 2,800 GB/s (median of 2 devices, 48 B/param)" in reach.message
    assert "58% of the 4,800 GB/s HBM spec" in reach.message  # median 2800 / 4800
    assert "Others: adamw_foreach 1,050 GB/s (30%)" in reach.message
    fused = reach.evidence["optimizers"]["adamw_fused"]
    assert fused["hbm_fraction"] == pytest.approx(0.8) and fused["bytes_per_param"] == 48
    assert reach.evidence["hbm_copy_gbps"] == 3500.0 and reach.evidence["spec_gbps"] == 4800.0
    assert not of(found, "weight_update.below_hbm")


@pytest.mark.parametrize(("gbps", "warned"), [(2000.0, False), (1999.0, True)])
def test_the_threshold_from_both_sides(gbps: float, warned: bool) -> None:
    ms = [copy(4000.0), *update("adamw_foreach", gbps), *update("sgd_foreach", gbps / 2)]
    found = analysis.findings(results(ms), Thresholds(given={"weight_update_min_vs_hbm": 0.5}))
    low = of(found, "weight_update.below_hbm")
    assert bool(low) is warned
    if warned:
        (f,) = low
        assert f.severity == "warn" and f.scope == "host:node0/cuda:0"
        assert "1,999 GB/s (adamw_foreach) on node0/cuda:0, 50% of the 4,000 GB/s" in f.message
        assert f.evidence["devices"][0]["hbm_fraction"] == pytest.approx(0.4998, abs=1e-4)
        # the best is foreach: the fix says fused first, then the layout's
        assert f.fix.startswith("Use the fused optimizer (torch.optim.AdamW(..., fused=True)")
        assert "master-weight fused kernel" in f.fix and "flat parameter buffer" in f.fix


def test_a_fused_best_below_the_threshold_is_not_told_to_fuse() -> None:
    ms = [copy(4000.0), *update("adamw_fused", 1000.0, layout="fp32")]
    (f,) = of(analysis.findings(results(ms), Thresholds()), "weight_update.below_hbm")
    assert "fused=True" not in f.fix and f.fix.startswith("Keep the parameters in few large")


def test_cpu_workers_are_told_not_warned() -> None:
    ms = [copy(10.0, "cpu:0"), *update("adamw_fused", 1.0, device="cpu:0")]
    (f,) = of(
        analysis.findings(results(ms, backend="gloo"), Thresholds()), "weight_update.below_hbm"
    )
    assert f.severity == "info"


def test_without_the_memory_benchmark_there_is_no_measured_share() -> None:
    ms = [*update("adamw_fused", 3100.0), *update("adamw_foreach", 1500.0)]
    found = analysis.findings(results(ms), Thresholds())
    (reach,) = of(found, "weight_update.hbm_fraction")
    assert reach.message.startswith("The weight update reaches 65% of the HBM spec")
    assert "the memory benchmark did not run on these devices" in reach.message
    assert "--only memory,weight_update" in reach.message
    assert reach.evidence["hbm_copy_gbps"] is None
    assert reach.evidence["optimizers"]["adamw_fused"]["hbm_fraction"] is None
    assert not of(found, "weight_update.below_hbm")  # nothing measured to be below


def test_a_share_above_one_is_explained_by_the_caches() -> None:
    ms = [copy(10.0, "cpu:0"), *update("sgd_fused", 30.0, device="cpu:0", layout="fp32")]
    (reach,) = of(
        analysis.findings(results(ms, "gloo"), Thresholds()), "weight_update.hbm_fraction"
    )
    assert "reaches 300% of HBM" in reach.message and "fit in caches" in reach.message


def test_one_finding_per_layout() -> None:
    ms = [copy(4000.0)]
    for layout in ("fp32", "bf16_master", "fp16_master"):
        ms += update("adamw_fused", 3000.0, layout=layout)
    reach = of(analysis.findings(results(ms), Thresholds()), "weight_update.hbm_fraction")
    assert [f.evidence["layout"] for f in reach] == ["fp32", "bf16_master", "fp16_master"]


def test_fused_against_foreach_beyond_and_inside_the_noise() -> None:
    ms = [
        *update("adamw_fused", 3000.0, layout="fp32"),
        *update("adamw_foreach", 1200.0, layout="fp32", seed=1),  # 2.5x slower, 1% jitter
        *update("adamw_fused", 3000.0, layout="bf16_master", jitter=0.5),
        *update("adamw_foreach", 2900.0, layout="bf16_master", jitter=0.5, seed=2),
        *update("sgd_fused", 3000.0, layout="fp32"),
    ]  # fmt: skip
    (f,) = of(analysis.findings(results(ms), Thresholds()), "weight_update.fused_vs_foreach")
    assert f.message.startswith("AdamW update time, fused against foreach")
    assert re.search(r"fp32 13\.\d vs 33\.\d ms \(fused 2\.\d\dx faster\)", f.message), f.message
    assert "bf16_master" in f.message and "(within the noise)" in f.message
    fp32 = f.evidence["layouts"]["fp32"]
    assert fp32["speedup"] == pytest.approx(2.5, rel=0.02)
    assert fp32["num_beyond_noise"] == fp32["num_tested"] == 1
    assert f.evidence["layouts"]["bf16_master"]["num_beyond_noise"] == 0
    assert f.fix  # sgd: no foreach measured, so no finding of its own


def test_too_few_repeats_are_said() -> None:
    ms = [*update("sgd_fused", 3000.0), *update("sgd_foreach", 1500.0)]
    for m in ms:
        if m.metric == "step_time_ms" and m.stats is not None:
            m.stats = Stats.from_samples((m.stats.values or [])[:2])  # 2 vs 2: p >= 1/3
    (f,) = of(analysis.findings(results(ms), Thresholds()), "weight_update.fused_vs_foreach")
    assert "too few repeats to tell it from the noise" in f.message and not f.fix


# --- section and figure -------------------------------------------------------------------


def two_layouts() -> list[Measurement]:
    ms = []
    for device in ("cuda:0", "cuda:1"):
        for layout, scale in (("fp32", 1.0), ("fp16_master", 0.9)):
            ms += update("adamw_fused", 3300.0 * scale, layout=layout, device=device)
            ms += update("sgd_foreach", 1800.0 * scale, layout=layout, device=device)
    return ms


def test_section_rows_and_the_times_grid() -> None:
    ms = two_layouts()
    s = registry.get("weight_update").summary()(ms, False)
    assert registry.get("weight_update").summary() is section.section
    rows = {r.what: r for r in s.rows}
    assert set(rows) == {
        "adamw_fused, fp32 (28 B/param)", "sgd_foreach, fp32 (20 B/param)",
        "adamw_fused, fp16_master (48 B/param)", "sgd_foreach, fp16_master (40 B/param)",
    }  # fmt: skip
    row = rows["adamw_fused, fp32 (28 B/param)"]
    assert (row.num_devices, row.median, row.reference) == (2, 3300.0, 4800.0)
    (grid,) = s.grids
    assert grid.header == ("optimizer", "fp32", "fp16_master")
    assert [r[0] for r in grid.rows] == ["adamw_fused", "sgd_foreach"]
    assert "1,420,396,544 parameters" in grid.title


def test_figure_bars_per_layout_against_the_spec() -> None:
    ms = two_layouts()
    (plot,) = figures.figures(ms, PlotContext())
    check_figure(plot, ms)
    bars = {t["name"]: t for t in traces(plot, "measurement")}
    assert list(bars) == ["fp32", "fp16_master"]
    assert bars["fp32"]["x"] == ["adamw_fused", "sgd_foreach"]
    assert bars["fp32"]["y"] == [3300.0, 1800.0]
    assert bars["fp16_master"]["y"] == pytest.approx([2970.0, 1620.0])
    assert "48 B/param" in bars["fp16_master"]["customdata"][0]
    (line,) = traces(plot, "reference")
    assert line["y"][0] == 4800.0 and "HBM spec" in line["name"]
    assert plot.figure["layout"]["barmode"] == "group"
    assert plot.table is not None and len(plot.table.rows) == 4
    assert any("memory benchmark's copy" in n for n in plot.notes)


def test_no_bandwidth_no_figure() -> None:
    assert figures.figures([copy(4000.0)], PlotContext()) == []
