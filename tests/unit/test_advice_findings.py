"""Each analysis that recommends a setting attaches its advice (analysis.advice) where it
recommends, with the gain it measured or predicted, and none where its gain is inside the
noise or not shown: the NCCL tuning sweep, the DataLoader sweep, fused against foreach, the
accumulation sweep, the scaling prediction, and placement (topology, no gain)."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from clusterbench import catalog
from clusterbench.analyses.placement import placements as placement
from clusterbench.analyses.prediction import findings as prediction_findings
from clusterbench.analyses.prediction.predict import predict
from clusterbench.benchmarks.attribution.accum import accum_idle_findings
from clusterbench.benchmarks.collectives.tune_findings import tune_findings
from clusterbench.benchmarks.dataloader import findings as dataloader
from clusterbench.benchmarks.weight_update import findings as weight_update
from clusterbench.judging.advice import Advice, advice_of, collect_advice
from clusterbench.schema import Finding, Measurement, ParamValue, Results, RunInfo, Stats, ToolInfo
from clusterbench.thresholds import Thresholds
from tests.pages import analysed
from tests.prediction_runs import model_steps, run_of
from tests.unit.test_attribution_accum import results_of as accum_results
from tests.unit.test_attribution_accum import sweep as accum_sweep
from tests.unit.test_nccl_tune import MIB, TREE_LL, default, repeats, rows_of
from tests.unit.test_placement import _affinity_finding, _layout, _results, _row, _two_numa_host
from tests.unit.test_report_figures import results_of
from tests.unit.test_weight_update_findings import results as wu_results
from tests.unit.test_weight_update_findings import update

catalog.register_builtin()


def only(findings: list[Finding], id_: str) -> Finding:
    (found,) = [f for f in findings if f.id == id_]
    return found


def advised(f: Finding) -> Advice:
    a = advice_of(f)
    assert a is not None, f.evidence
    return a


# --- NCCL tuning -------------------------------------------------------------------------------


def test_a_tuning_win_is_measured_advice_with_its_export() -> None:
    ms = default() + rows_of(TREE_LL, repeats(70.0, n=7))
    f = only(tune_findings(results_of(ms, num_nodes=1)), "collectives.tune.recommend")
    a = advised(f)
    (row,) = f.evidence["rows"]
    assert a.change == f.fix == f"export {TREE_LL}" and a.basis == "measured"
    assert a.gain == pytest.approx(1 - 1 / row["gain"], abs=1e-6)  # ~30% less time
    assert a.gain == pytest.approx(0.3, abs=0.02) and a.gain_of == "all_reduce time at 32 KiB"
    low, high = row["gain_ci"]
    assert a.noise == pytest.approx((1 / low - 1 / high) / 2, abs=1e-6)
    assert "7 vs 14 repeats" in a.evidence and f"{low:.2f}–{high:.2f}×" in a.evidence


def test_tuning_wins_at_several_sizes_give_their_geometric_mean() -> None:
    ms = default() + default(size=4 * MIB, centre=400.0)
    ms += rows_of(TREE_LL, repeats(70.0, n=7)) + rows_of(TREE_LL, repeats(320.0, n=7), size=4 * MIB)
    f = only(tune_findings(results_of(ms, num_nodes=1)), "collectives.tune.recommend")
    gains = [r["gain"] for r in f.evidence["rows"]]
    a = advised(f)
    assert a.gain == pytest.approx(1 - 1 / statistics.geometric_mean(gains), abs=1e-6)
    assert a.gain_of == "all_reduce time at 32 KiB and 4 MiB (geometric mean)"
    assert a.evidence.startswith("2 sizes, each beyond the noise")


def test_keeping_the_defaults_is_no_advice() -> None:
    ms = default() + rows_of(TREE_LL, repeats(99.5, n=7))
    (keep,) = tune_findings(results_of(ms, num_nodes=1))
    assert keep.id == "collectives.tune.keep_defaults" and advice_of(keep) is None


# --- the DataLoader sweep ---------------------------------------------------------------------


def loader(workers: int, windows: list[float] | None, value: float) -> Measurement:
    params: dict[str, ParamValue] = {
        "dataset": "images", "num_workers": workers, "pin_memory": workers > 0,
        "prefetch_factor": 2 if workers else None, "batch_size": 64,
    }  # fmt: skip
    return Measurement(
        benchmark="dataloader", metric="loader_samples_per_s", value=value, unit="samples/s",
        params=params, rank=0, host="h1", device="cuda:0",
        stats=Stats.from_samples(windows) if windows else None,
    )  # fmt: skip


def loader_run(
    default_windows: list[float] | None, best_windows: list[float] | None,
    values: tuple[float, float] = (1000.0, 3000.0),
) -> Results:  # fmt: skip
    """The defaults and 8 workers (overall rates ``values``, windows as given), a faster step."""
    step = Measurement(
        benchmark="dataloader", metric="step_samples_per_s", value=5000.0, unit="samples/s",
        params={"dataset": "images", "model": "resnet50", "batch_size": 64}, rank=0, host="h1",
        device="cuda:0",
    )  # fmt: skip
    ms = [loader(0, default_windows, values[0]), loader(8, best_windows, values[1]), step]
    run = RunInfo(id="r", started="t", suite="standard", world_size=1, num_nodes=1,
                  backend="nccl", command="c")  # fmt: skip
    return Results(tool=ToolInfo(version="0"), run=run, measurements=ms)


def windows(centre: float, n: int, spread: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(v) for v in centre * (1 + spread * rng.standard_normal(n))]


def slow_default(r: Results) -> Finding:
    return only(dataloader.findings(r, Thresholds()), "dataloader.slow_default_loader")


def test_a_loader_setting_beyond_the_noise_is_measured_advice() -> None:
    f = slow_default(loader_run(windows(1000, 40, 0.03, 1), windows(3000, 5, 0.03, 2)))
    a = advised(f)
    assert a.change == "DataLoader(num_workers=8, prefetch_factor=2, pin_memory=True)"
    assert a.better == "higher" and a.basis == "measured"
    assert a.gain == pytest.approx(2.0, rel=0.05) and a.noise is not None and a.noise < 0.2
    assert a.gain_of == "DataLoader samples/s on the images dataset"
    assert a.evidence.startswith("medians of 5 vs 40 timed windows")


def test_a_loader_setting_inside_the_noise_or_untimed_is_no_advice() -> None:
    noisy = slow_default(
        loader_run(windows(1000, 40, 0.3, 1), windows(1050, 5, 0.3, 2), values=(1000, 1050))
    )
    assert advice_of(noisy) is None and noisy.fix  # the finding still names the sweep's best
    untimed = slow_default(loader_run(None, None))
    assert advice_of(untimed) is None


# --- fused against foreach --------------------------------------------------------------------


def fused_finding(ms: list[Measurement]) -> Finding:
    return only(
        weight_update.findings(wu_results(ms), Thresholds()), "weight_update.fused_vs_foreach"
    )


def test_fused_beyond_the_noise_is_measured_advice() -> None:
    ms = [
        *update("adamw_fused", 3000.0, layout="fp32"),
        *update("adamw_foreach", 1200.0, layout="fp32", seed=1),
        *update("adamw_fused", 3000.0, layout="bf16_master", jitter=0.5),
        *update("adamw_foreach", 2900.0, layout="bf16_master", jitter=0.5, seed=2),
    ]  # fmt: skip
    f = fused_finding(ms)
    a = advised(f)
    fp32 = f.evidence["layouts"]["fp32"]
    assert a.change == "torch.optim.AdamW(..., fused=True)"
    assert a.gain == pytest.approx(1 - fp32["fused_ms"] / fp32["foreach_ms"], abs=1e-3)
    assert a.gain == pytest.approx(0.6, abs=0.02)
    assert a.gain_of == "AdamW update time, fp32 parameters and gradients (one device)"
    assert "on the one device tested" in a.evidence


def test_fused_inside_the_noise_or_split_between_devices_is_no_advice() -> None:
    inside = [
        *update("adamw_fused", 3000.0, layout="fp32", jitter=0.5),
        *update("adamw_foreach", 2900.0, layout="fp32", jitter=0.5, seed=2),
    ]
    assert advice_of(fused_finding(inside)) is None
    # fused 2.5x faster on one device, foreach 2x faster on the other: no one answer
    split = [
        *update("sgd_fused", 3000.0, device="cuda:0"),
        *update("sgd_foreach", 1200.0, device="cuda:0", seed=1),
        *update("sgd_fused", 1500.0, device="cuda:1"),
        *update("sgd_foreach", 3000.0, device="cuda:1", seed=1),
    ]
    f = fused_finding(split)
    assert f.fix and advice_of(f) is None  # beyond the noise both ways: stated, not advised


# --- the accumulation sweep -------------------------------------------------------------------


def test_a_rise_past_four_steps_is_measured_advice() -> None:
    ms = accum_sweep({1: 3.0, 2: 3.1, 4: 3.0, 8: 9.0, 16: 11.0}, noise=0.3)
    (f,) = accum_idle_findings(accum_results(ms))
    a = advised(f)
    rise = f.evidence["rise_points"]["16"]
    low, high = f.evidence["interval_points"]["16"]
    assert rise == max(f.evidence["rise_points"].values())
    assert a.gain == pytest.approx(rise / 100, abs=1e-6)
    assert a.noise == pytest.approx((high - low) / 200, abs=1e-6)
    assert a.change.startswith("at most 4 gradient accumulation steps") and "16 here" in a.change
    assert (
        a.gain_of == "of the iteration in coordination idle at 16 accumulation steps (against 1–4)"
    )


def test_flat_idle_is_no_advice() -> None:
    ms = accum_sweep({1: 3.1, 2: 3.0, 4: 3.2, 8: 3.3, 16: 3.1}, noise=0.8)
    (f,) = accum_idle_findings(accum_results(ms))
    assert advice_of(f) is None


# --- the scaling prediction -------------------------------------------------------------------


def scaling(r: Results, target: float = 0.9) -> Finding:
    found = prediction_findings.findings(
        r, analysed(r, Thresholds(prediction_target_efficiency=target))
    )
    return only(found, "prediction.scaling")


def test_the_bandwidth_to_provision_is_predicted_advice_against_the_models_error() -> None:
    r = run_of(num_nodes=2)
    p = predict(r, target=0.85)  # at 90% it would need more than eight 800G NICs: no advice
    last = [row for row in p.rows if row.strategy == "ddp"][-1]
    assert p.validation is not None and last.needed_gbps is not None and not last.beyond_nics
    a = advised(scaling(r, target=0.85))
    assert a.basis == "predicted" and a.better == "higher"
    assert a.gain == pytest.approx(0.85 / last.step.efficiency - 1, abs=1e-5)
    assert a.noise == pytest.approx(p.validation.max_abs_rel_error, abs=1e-6)
    assert a.change.startswith(f"provision at least {last.needed_gbps:,.0f} Gb/s")
    assert a.gain_of.startswith("throughput at 1,024 GPUs")


def test_no_predicted_advice_without_a_measured_error_below_the_gain() -> None:
    steps = model_steps([1, 2, 4, 8, 16], gpus_per_node=8)
    steps[16] *= 1.5  # the model misses 16 GPUs by a third: more than the gain
    missed = run_of(num_nodes=2, steps_s=steps)
    assert scaling(missed).severity == "warn" and advice_of(scaling(missed)) is None
    assert predict(run_of(num_nodes=2)).rows[-2].beyond_nics  # 1,024 ddp at 90%
    assert advice_of(scaling(run_of(num_nodes=2))) is None  # beyond any NIC: not advice
    one_node = run_of(num_nodes=1)  # the inter-node link is assumed, not measured
    assert scaling(one_node).fix and advice_of(scaling(one_node)) is None
    assert advice_of(scaling(run_of(num_nodes=2, cpu=True))) is None  # CPU ranks: no cluster


# --- placement (topology) ---------------------------------------------------------------------


def test_placement_fixes_are_topology_advice_named_once() -> None:
    found = placement.findings(
        _results(_layout(2, 4, interleaved=True)),
        analysed(_results(_layout(2, 4, interleaved=True)), Thresholds()),
    )
    order = only(found, "placement.rank_order")
    a = advised(order)
    assert (a.change, a.gain, a.basis) == (order.fix, None, "topology")
    assert a.evidence.startswith("global ranks round-robin across 2 nodes")
    assert [x.change for x in collect_advice(found)].count(order.fix) == 1


def test_a_block_layout_gives_no_placement_advice() -> None:
    found = placement.findings(
        _results(_layout(2, 4, interleaved=False)),
        analysed(_results(_layout(2, 4, interleaved=False)), Thresholds()),
    )
    assert collect_advice(found) == []


def test_the_numa_binding_is_topology_advice_with_its_cost() -> None:
    rows = [_row(r, 0, r, gpu=r, gpu_numa_node=r // 2, cpus="32-63", cpu_numa_nodes=[1])
            for r in range(4)]  # fmt: skip
    r = _results(rows, hosts=[_two_numa_host()], findings=[_affinity_finding("node0", 0)])
    layout = only(placement.findings(r, analysed(r, Thresholds())), "placement.layout")
    a = advised(layout)
    assert layout.fix.startswith(a.change + " [cost ") and a.basis == "topology"
    assert "NUMA cost not measured in this run" in a.evidence
