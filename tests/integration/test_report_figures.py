"""The HTML report's figures of a real two-worker CPU run: the values drawn are the measurements'
own, and every figure is valid, pure data."""

from __future__ import annotations

import json

import pytest

from clusterbench.benchmarks.collectives import CollectivesMetrics as C
from clusterbench.benchmarks.collectives import figures as collectives_figures
from clusterbench.benchmarks.gemm import GemmMetrics as G
from clusterbench.schema import (
    Measurement,
    Results,
    load_results,
)
from clusterbench.views.plots import PlotContext
from tests.helpers import cli
from tests.unit.test_report_figures import figures_of, traces

MIB = 2**20
_CPU_BENCHMARKS = ("gemm", "memory", "collectives", "checkpoint", "attribution")
"""What two CPU workers measure in seconds (the loader sweep takes half a minute: synthetic)."""


@pytest.fixture(scope="module")
def cpu_results(tmp_path_factory: pytest.TempPathFactory) -> Results:
    """gemm, memory, a short collectives sweep, checkpoints and attribution on two CPU
    workers."""
    out = tmp_path_factory.mktemp("figures") / "run"
    proc = cli(
        "run",
        "--device",
        "cpu",
        "--nproc",
        "2",
        "--only",
        ",".join(_CPU_BENCHMARKS),
        "--out",
        str(out),
        "--no-history",
        "--set",
        "collectives.ops=all_reduce,all_gather",
        "--set",
        f"collectives.max_bytes={MIB}",
        timeout=400,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return load_results(out)


def of(results: Results, name: str) -> list[Measurement]:
    return [m for m in results.measurements if m.benchmark == name]


@pytest.mark.parametrize("name", _CPU_BENCHMARKS)
def test_figures_of_a_cpu_run_draw_its_measurements(cpu_results: Results, name: str) -> None:
    plots = figures_of(name, of(cpu_results, name))
    assert plots, f"{name} drew nothing"
    for plot in plots:
        assert traces(plot, "measurement")
        assert plot.table is not None


def test_gemm_bars_of_two_workers_are_their_median_with_both_as_error_bar(
    cpu_results: Results,
) -> None:
    """The bar is the median of the two workers, as the gemm table gives it (the mean of the
    two), the error bar reaching down to one and up to the other."""
    ms = G.tflops.select(of(cpu_results, "gemm"))
    (plot,) = figures_of("gemm", of(cpu_results, "gemm"))
    for bars in traces(plot, "measurement"):
        error = bars["error_y"]
        for shape, y, up, down in zip(bars["x"], bars["y"], error["array"], error["arrayminus"],
                                      strict=True):  # fmt: skip
            m, n, k = [int(shape[:-1])] * 3 if shape.endswith("³") else map(int, shape.split("×"))
            pair = [
                x.value for x in ms if x.params == {"dtype": bars["name"], "m": m, "n": n, "k": k}
            ]
            assert len(pair) == 2
            assert y == pytest.approx(sum(pair) / 2)
            assert y + up == pytest.approx(max(pair)) and y - down == pytest.approx(min(pair))
    assert "TFLOP/s" in plot.figure["layout"]["yaxis"]["title"]["text"]


def test_busbw_curves_are_the_back_to_back_sweep_on_a_log_axis(cpu_results: Results) -> None:
    ms = of(cpu_results, "collectives")
    (plot,) = figures_of("collectives", ms)
    assert plot.figure["layout"]["xaxis"]["type"] == plot.figure["layout"]["yaxis"]["type"] == "log"
    curves = traces(plot, "measurement")
    assert [c["name"] for c in curves] == ["all_reduce", "all_gather"]
    for curve in curves:
        sweep = sorted(
            (m.params["size_bytes"], m.value)
            for m in C.busbw.select(ms)
            if m.params["op"] == curve["name"] and m.params["mode"] == "back_to_back"
        )
        assert list(zip(curve["x"], curve["y"], strict=True)) == sweep
        assert curve["line"]["dash"] == "solid"
    assert traces(plot, "base") == []


def test_a_comparison_draws_the_base_run_dashed(cpu_results: Results) -> None:
    ms = of(cpu_results, "collectives")
    base = [m.model_copy(update={"value": m.value / 2}) for m in ms]
    (plot,) = figures_of("collectives", ms, PlotContext(base=base))
    dashed = traces(plot, "base")
    assert [t["name"] for t in dashed] == ["base: all_reduce", "base: all_gather"]
    for t, new in zip(dashed, traces(plot, "measurement"), strict=True):
        assert t["line"]["dash"] == "dash" and t["line"]["color"] == new["line"]["color"]
        assert t["y"] == [y / 2 for y in new["y"]]
    assert any("base run" in n for n in plot.notes)


def test_every_figure_is_pure_data(cpu_results: Results) -> None:
    """Nothing but JSON types, so the page embeds each figure as it is."""
    ms = of(cpu_results, "collectives")
    for plot in collectives_figures.figures(ms, PlotContext(base=ms)):
        assert json.loads(json.dumps(plot.figure, allow_nan=False)) == plot.figure
