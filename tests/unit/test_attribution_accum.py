"""The accumulation sweep of attribution: idle and collective wait per iteration read from
hand-built traces of two ranks, the statement on planted series, its finding, the report's
table and figure, and the settings."""

from __future__ import annotations

import random
import statistics
from typing import Any

import pytest

from clusterbench.benchmarks.attribution import AttributionConfig
from clusterbench.benchmarks.attribution import figures as attribution_figures
from clusterbench.benchmarks.attribution import findings as attribution_analysis
from clusterbench.benchmarks.attribution import section as attribution_section
from clusterbench.benchmarks.attribution.accum import (
    PAPER_IDLE_PCT,
    accum_curve,
    accum_idle_findings,
    accum_statement,
)
from clusterbench.config import ConfigError, build_run_config
from clusterbench.schema import Measurement, Results, RunInfo, ToolInfo
from clusterbench.thresholds import Thresholds
from clusterbench.traces.idle import iteration_idle
from clusterbench.traces.ranks import start_waits
from clusterbench.traces.trace import activities, step_collectives
from clusterbench.views.plots import PlotContext
from tests.unit.test_report_figures import check_figure, traces

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
GEMM = "sm90_xmma_gemm_bf16bf16"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4>"


def ev(name: str, ts: float, dur: float, *, cat: str = "kernel", tid: int = 7) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": {}}  # fmt: skip


def step(n: int, ts: float, dur: float) -> dict[str, Any]:
    return ev(f"ProfilerStep#{n}", ts, dur, cat="user_annotation", tid=1)


def rank0() -> list[dict[str, Any]]:
    """Step 5 (0-1000 us): gemm 0-300, idle 300-350, elementwise 350-500, all-reduce 500-900
    (starts 0.5 ms in), idle 900-1000.  Step 6 (1000-2000): gemm 1000-1400, idle 1400-1500,
    all-reduce 1500-1900 with an elementwise kernel 1500-1600 beside it, idle 1900-2000."""
    return [
        step(5, 0, 1000),
        ev(GEMM, 0, 300), ev(ELEMENTWISE, 350, 150), ev(NCCL, 500, 400, tid=20),
        step(6, 1000, 1000),
        ev(GEMM, 1000, 400), ev(NCCL, 1500, 400, tid=20), ev(ELEMENTWISE, 1500, 100, tid=8),
    ]  # fmt: skip


def rank1() -> list[dict[str, Any]]:
    """The slower rank, on a clock of its own (10 ms later): step 5 gemm 0-600, idle 600-700,
    all-reduce 700-900 (0.7 ms in), idle 900-1000; step 6 gemm 0-700, all-reduce 700-950,
    idle 950-1000 (offsets from each step's start)."""
    return [
        step(5, 10_000, 1000),
        ev(GEMM, 10_000, 600), ev(NCCL, 10_700, 200, tid=20),
        step(6, 11_000, 1000),
        ev(GEMM, 11_000, 700), ev(NCCL, 11_700, 250, tid=20),
    ]  # fmt: skip


def two_ranks() -> list[list[Any]]:
    """Each rank's iterations, after the ranks matched their collectives (as the benchmark
    does: step_collectives on each, start_waits over all, then iteration_idle)."""
    traces_ = [rank0(), rank1()]
    acts = [activities(t) for t in traces_]
    waits = start_waits([step_collectives(t, acts=a) for t, a in zip(traces_, acts, strict=True)])
    return [
        iteration_idle(t, acts=a, waits_ms=w) for t, a, w in zip(traces_, acts, waits, strict=True)
    ]


def test_idle_and_wait_per_iteration_come_out_as_constructed() -> None:
    (s5, s6), (t5, t6) = two_ranks()
    assert (s5.step, s6.step) == (5, 6) and s5.iteration_ms == pytest.approx(1.0)
    # rank 0: gaps 300-350 and 900-1000; it starts the all-reduce 0.2 ms before rank 1
    assert s5.idle_ms == pytest.approx(0.15) and s5.wait_ms == pytest.approx(0.2)
    assert (s5.idle_pct, s5.wait_pct) == (pytest.approx(15.0), pytest.approx(20.0))
    # step 6: it waits 0.2 ms again, half of it under an elementwise kernel (not idle)
    assert s6.idle_ms == pytest.approx(0.2) and s6.wait_ms == pytest.approx(0.1)
    # rank 1 is the latest to start: it waits for nobody, its gaps are idle
    assert (t5.idle_ms, t5.wait_ms) == (pytest.approx(0.2), 0.0)
    assert (t6.idle_ms, t6.wait_ms) == (pytest.approx(0.05), 0.0)


def test_a_wait_is_at_most_the_collective_and_unmatched_ones_wait_nothing() -> None:
    from clusterbench.traces.trace import Collective

    early = {1: [Collective("a", 1.0, 2.0), Collective("b", 5.0, 1.0)], 2: []}
    late = {1: [Collective("a", 9.0, 1.0)]}
    # a: rank 0 starts 8 ms early, but its collective lasts 2 ms; b has no partner
    assert start_waits([early, late]) == [{1: [2.0]}, {1: [0.0]}]
    one_rank = [{3: [Collective("a", 1.0, 2.0)]}]
    assert start_waits(one_rank) == [{3: [0.0]}]


def test_a_host_gap_on_cpu_ranks_is_idle() -> None:
    """CPU traces: the main thread's ops and the gloo thread's spans are the activity."""
    cpu = [
        step(2, 0, 1000),
        ev("aten::mm", 0, 200, cat="cpu_op", tid=1),
        ev("aten::add_", 600, 100, cat="cpu_op", tid=1),  # 200-600: a 0.4 ms sleep
        ev("gloo:all_reduce", 700, 250, cat="user_annotation", tid=3),
    ]
    [it] = iteration_idle(cpu, acts=activities(cpu))
    assert it.idle_ms == pytest.approx(0.45) and it.wait_ms == 0.0


# --- the statement on planted series ----------------------------------------------------------


def sweep(
    shares: dict[int, float], *, noise: float, num_ranks: int = 2, iterations: int = 3,
    wait: float = 0.5, seed: int = 1,
) -> list[Measurement]:  # fmt: skip
    """idle_pct / wait_pct of every rank's iterations and their means, as the benchmark
    records them: idle + wait = ``shares[k]`` plus uniform noise of +-``noise``."""
    rng = random.Random(seed)
    out = []
    for k, share in shares.items():
        for rank in range(num_ranks):
            idle = [share - wait + rng.uniform(-noise, noise) for _ in range(iterations)]
            for metric, values in (("idle_pct", idle), ("wait_pct", [wait] * iterations)):
                common = {"accum_steps": k, "model": "1.3b", "world_size": num_ranks}
                out.append(measurement(metric, sum(values) / iterations, rank=rank,
                                       rank_step="mean", **common))  # fmt: skip
                out += [measurement(metric, v, rank=rank, rank_step=str(3 + i), **common)
                        for i, v in enumerate(values)]  # fmt: skip
    return out


def measurement(metric: str, value: float, *, rank: int, **params: Any) -> Measurement:
    return Measurement(benchmark="attribution", metric=metric, value=value, unit="%",
                       params=params, rank=rank, host=f"node{rank // 8}",
                       device=f"cuda:{rank % 8}")  # fmt: skip


def results_of(ms: list[Measurement], *, backend: str = "nccl", **settings: Any) -> Results:
    run = RunInfo(id="r", started="t", suite="standard", world_size=2, num_nodes=1,
                  backend=backend, command="c",
                  config={"benchmarks": {"attribution": settings}})  # fmt: skip
    return Results(tool=ToolInfo(version="0"), run=run, measurements=ms)


def test_a_rise_past_four_steps_is_found_and_warned_with_the_fix() -> None:
    ms = sweep({1: 3.0, 2: 3.1, 4: 3.0, 8: 9.0, 16: 11.0}, noise=0.3)
    statement = accum_statement(accum_curve(ms), min_rise_pct=1.0)
    assert statement is not None and statement.rises
    assert statement.baseline_steps == [1, 2, 4] and statement.num_baseline_samples == 18
    assert statement.baseline_pct == pytest.approx(3.0, abs=0.35)
    eight, sixteen = statement.above
    assert eight.accum_steps == 8 and eight.rise_points == pytest.approx(6.0, abs=0.6)
    assert eight.beyond_noise and eight.interval_points[0] > 0 and sixteen.rises
    [finding] = accum_idle_findings(results_of(ms))
    assert finding.id == "attribution.accum_idle" and finding.severity == "warn"
    assert "rises past four accumulation steps" in finding.message
    assert "at 1–4 accumulation steps" in finding.message and "beyond the noise" in finding.message
    assert "fewer accumulation steps" in finding.fix.lower() and "bucket" in finding.fix
    assert finding.evidence["rises"] is True and finding.evidence["paper_pct"] == PAPER_IDLE_PCT
    # CPU workers: stated, not judged
    [cpu] = accum_idle_findings(results_of(ms, backend="gloo"))
    assert cpu.severity == "info" and "rises past" in cpu.message
    assert "CUDA graphs" in finding.fix and "CUDA graphs" not in cpu.fix  # CPU words on CPU
    assert "fewer accumulation steps" in cpu.fix.lower()


def test_flat_idle_with_noise_is_no_rise() -> None:
    ms = sweep({1: 3.1, 2: 3.0, 4: 3.2, 8: 3.3, 16: 3.1}, noise=0.8)
    statement = accum_statement(accum_curve(ms), min_rise_pct=1.0)
    assert statement is not None and not statement.rises
    assert all(not r.beyond_noise for r in statement.above)
    assert all(r.noise_points > 0.1 for r in statement.above)
    [finding] = attribution_analysis.findings(results_of(ms), Thresholds())
    assert finding.id == "attribution.accum_idle" and finding.severity == "info"
    assert "within the noise: no rise past four steps here" in finding.message
    assert "(the bottleneck-analysis paper saw up to 11.7%)" in finding.message
    assert finding.fix == ""


def test_a_rise_beyond_the_noise_but_below_the_minimum_is_stated_not_warned() -> None:
    ms = sweep({1: 3.0, 2: 3.0, 4: 3.0, 8: 3.5}, noise=0.02)
    [finding] = accum_idle_findings(results_of(ms))
    assert finding.severity == "info" and "no rise of 1 point or more" in finding.message
    assert "+0.5" in finding.message and "beyond the noise" in finding.message
    # the run's own setting decides
    [strict] = accum_idle_findings(results_of(ms, accum_min_rise_pct=0.25))
    assert strict.severity == "warn" and strict.evidence["min_rise_pct"] == 0.25


def test_a_sweep_on_one_side_of_four_is_not_judged() -> None:
    ms = sweep({1: 3.0, 2: 3.5}, noise=0.1)
    assert accum_statement(accum_curve(ms), min_rise_pct=1.0) is None
    [finding] = accum_idle_findings(results_of(ms))
    assert finding.severity == "info" and "not tested here" in finding.message
    assert "accum_sweep" in finding.fix
    assert accum_idle_findings(results_of([])) == []


def test_the_curve_pairs_idle_and_wait_of_each_iteration() -> None:
    ms = sweep({1: 5.0, 8: 6.0}, noise=0.0, num_ranks=3, iterations=2, wait=1.5)
    one, eight = accum_curve(ms)
    assert (one.accum_steps, eight.accum_steps) == (1, 8)
    assert sorted(one.idle) == [0, 1, 2] and len(one.samples) == 6
    assert one.samples == pytest.approx([5.0] * 6) and eight.wait_samples == [1.5] * 6


# --- report ---------------------------------------------------------------------------------


def test_the_section_has_a_row_per_accumulation_count() -> None:
    ms = sweep({1: 3.0, 2: 3.1, 4: 3.0, 8: 9.0}, noise=0.3)
    ms += [m.model_copy(update={"metric": "idle_ms", "unit": "ms", "value": 10.0 * m.value})
           for m in ms if m.metric == "idle_pct"]  # fmt: skip
    section = attribution_section.section(ms, multi_host=False)
    [grid] = section.grids  # no profile of the classes here: the sweep's table alone
    assert grid.header[0] == "steps"
    assert [row[0] for row in grid.rows] == ["1", "2", "4", "8"]
    eight = grid.rows[-1]
    rise, noise = eight[4].split(" ±")
    assert float(rise) == pytest.approx(6.0, abs=0.5) and 0 < float(noise) < 1
    assert grid.rows[0][4] == "-"  # the baseline's counts
    assert eight[7] == "6"  # 2 ranks x 3 iterations
    eight_ms = [m.value for m in ms if m.metric == "idle_ms" and m.params["accum_steps"] == 8
                and m.params["rank_step"] == "mean"]  # fmt: skip
    assert float(eight[5]) == pytest.approx(statistics.median(eight_ms), rel=0.01)


def test_the_sweeps_table_fits_80_columns() -> None:
    from clusterbench import catalog
    from tests.unit.test_console_summary import render

    catalog.register_builtin()
    ms = sweep({1: 3.0, 2: 3.1, 4: 3.0, 8: 9.0, 16: 10.5}, noise=0.3)
    ms += [m.model_copy(update={"metric": "idle_ms", "unit": "ms", "value": 123.4 * m.value})
           for m in ms if m.metric == "idle_pct"]  # fmt: skip
    out = render(results_of(ms))
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= 80
    header = next(line for line in out.splitlines() if line.startswith("steps "))
    assert header.split() == ["steps", "idle", "%", "wait", "%", "idle+wait", "%", "vs", "1–4",
                              "idle", "ms", "wait", "ms", "n"]  # fmt: skip
    sixteen = next(line for line in out.splitlines() if line.startswith("16 "))
    assert "±" in sixteen


def test_the_figure_draws_each_rank_faint_the_median_bold_and_the_papers_line() -> None:
    ms = sweep({1: 3.0, 2: 3.1, 4: 3.0, 8: 4.0, 16: 5.0}, noise=0.5, num_ranks=3)
    plots = attribution_figures.figures(ms, PlotContext())
    [plot] = plots  # no classes measured: the sweep's figure alone
    check_figure(plot, ms)
    faint_idle, bold_idle, faint_wait, bold_wait = traces(plot, "measurement")
    assert faint_idle["opacity"] < 1 and bold_idle["line"]["width"] > faint_idle["line"]["width"]
    # three ranks, five counts each, apart by gaps
    assert faint_idle["x"] == [*["1", "2", "4", "8", "16", None] * 3]
    means = {(m.rank, m.params["accum_steps"]): m.value for m in ms
             if m.metric == "idle_pct" and m.params["rank_step"] == "mean"}  # fmt: skip
    assert faint_idle["y"][:5] == [means[(0, k)] for k in (1, 2, 4, 8, 16)]
    for i, k in enumerate((1, 2, 4, 8, 16)):
        ranked = sorted(means[(r, k)] for r in range(3))
        assert bold_idle["y"][i] == ranked[1]  # the median rank's own value
        samples = [m.value for m in ms if m.metric == "idle_pct" and m.params["accum_steps"] == k
                   and m.params["rank_step"] != "mean"]  # fmt: skip
        assert bold_idle["y"][i] + bold_idle["error_y"]["array"][i] == pytest.approx(max(samples))
        assert bold_idle["y"][i] - bold_idle["error_y"]["arrayminus"][i] == pytest.approx(
            min(samples)
        )
    assert bold_wait["y"] == [0.5] * 5 and "wait" in faint_wait["name"]
    [line] = plot.figure["layout"]["shapes"]
    assert line["y0"] == line["y1"] == PAPER_IDLE_PCT
    assert "11.7%" in plot.figure["layout"]["annotations"][0]["text"]
    assert plot.figure["layout"]["yaxis"]["range"][1] > PAPER_IDLE_PCT
    assert plot.table is not None and [r[0] for r in plot.table.rows] == ["1", "2", "4", "8", "16"]


def test_a_large_run_draws_four_traces() -> None:
    ms = sweep({1: 3.0, 8: 3.5}, noise=0.5, num_ranks=256, iterations=2)
    [plot] = attribution_figures.figures(ms, PlotContext(multi_host=True))
    check_figure(plot, ms)
    assert len(traces(plot)) == 4
    assert "rank 255 (node31/cuda:7)" in traces(plot)[0]["customdata"]


# --- settings -------------------------------------------------------------------------------


@pytest.mark.parametrize("device_type", ["cpu", "cuda"])
def test_the_sweep_runs_from_the_standard_suite_on(device_type: str) -> None:
    sweeps = {
        suite: AttributionConfig.preset(suite=suite, device_type=device_type).accum_sweep
        for suite in ("quick", "standard", "full")
    }
    assert sweeps == {"quick": [], "standard": [1, 2, 4, 8], "full": [1, 2, 4, 8, 16]}


def test_bad_sweeps_are_refused() -> None:
    cfg = build_run_config(
        device_type="cpu", suite="standard", sets=["attribution.accum_sweep=2,4,16"]
    )
    assert cfg.benchmarks["attribution"].accum_sweep == [2, 4, 16]
    for bad in ("0,1", "4,4"):
        with pytest.raises(ConfigError, match="accum_sweep entries must be distinct and >= 1"):
            build_run_config(
                device_type="cpu", suite="standard", sets=[f"attribution.accum_sweep={bad}"]
            )
    with pytest.raises(ConfigError, match="accum_min_rise_pct must be >= 0"):
        build_run_config(
            device_type="cpu", suite="standard", sets=["attribution.accum_min_rise_pct=-1"]
        )
