"""The NCCL tuning sweep's verdict (analysis.nccl_tune) on synthetic repeats: a clear win is
recommended with the exact export, a difference inside the noise or below the practical gain
is not, an unconfirmed setting never is, one slower at another size is not; and the summary's
table and the report's figure of the same rows."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from clusterbench import catalog
from clusterbench.benchmarks.collectives import CollectivesMetrics as C
from clusterbench.benchmarks.collectives import findings as collectives_analysis
from clusterbench.benchmarks.collectives.section import section, tune_grids
from clusterbench.benchmarks.collectives.tune_analysis import ALPHA, recommendations, tune_rows
from clusterbench.benchmarks.collectives.tune_findings import tune_findings
from clusterbench.collective_facts import bus_factor
from clusterbench.schema import Measurement, ParamValue, Stats
from clusterbench.thresholds import Thresholds
from tests.unit.test_report_figures import figures_of, results_of, traces

KIB, MIB = 2**10, 2**20
TREE_LL = "NCCL_ALGO=allreduce:Tree NCCL_PROTO=allreduce:LL"
RING_SIMPLE = "NCCL_ALGO=allreduce:Ring NCCL_PROTO=allreduce:Simple"
AG_RING = "NCCL_ALGO=allgather:Ring NCCL_PROTO=allgather:Simple"


@pytest.fixture(autouse=True, scope="module")
def _registered() -> None:
    catalog.register_builtin()


def repeats(centre: float, *, n: int, spread: float = 0.01, seed: int = 1) -> list[float]:
    """``n`` timings (us) around ``centre``, relative spread ``spread`` (normal, seeded)."""
    rng = np.random.default_rng(seed)
    return [float(v) for v in centre * (1 + spread * rng.standard_normal(n))]


def rows_of(
    setting: str, samples: list[float], *, op: str = "all_reduce", size: int = 32 * KIB,
    confirmed: bool = True, num_wrong: int = 0,
) -> list[Measurement]:  # fmt: skip
    """A setting's two measurements as the sweep records them (rank 0, world of 2)."""
    kind = (
        "default" if setting == "default" else "channels" if "channels" in setting else "algo_proto"
    )
    params: dict[str, ParamValue] = {
        "op": op, "size_bytes": size, "group": "world", "group_kind": "world", "group_size": 2,
        "dtype": "fp32", "setting": setting, "setting_kind": kind, "num_wrong": num_wrong,
        "confirmed": confirmed, "log": "16 coll channels", "log_channels": 16,
    }  # fmt: skip
    if kind == "algo_proto":
        algo, proto = (part.split(":")[-1] for part in setting.split())
        params.update(algo=algo, proto=proto, per_function=True)
    if kind == "channels":
        params["channels"] = int(setting.split("=")[1])
    if kind == "default":
        params["min_gain"] = 0.05
    median = statistics.median(samples)
    common = {"params": params, "rank": 0, "host": "gpu7", "device": "cuda:0"}
    latency = Measurement(benchmark="collectives", metric="tune_latency_us", value=median,
                          unit="us", stats=Stats.from_samples(samples), **common)  # fmt: skip
    busbw = size * bus_factor(op, 2) / (median * 1e-6) / 1e9
    bus = Measurement(benchmark="collectives", metric="tune_busbw", value=busbw, unit="GB/s",
                      **common)  # fmt: skip
    return [latency, bus]


def default(centre: float = 100.0, **kw: object) -> list[Measurement]:
    return rows_of("default", repeats(centre, n=14, seed=7), **kw)  # type: ignore[arg-type]


def verdicts(ms: list[Measurement]) -> dict[tuple[str, str, int], str]:
    return {(r.op, r.setting, r.size_bytes): r.verdict for r in tune_rows(ms)}


def test_a_clear_win_is_recommended_with_the_exact_export() -> None:
    ms = default() + rows_of(TREE_LL, repeats(70.0, n=7))
    (row,) = [r for r in tune_rows(ms) if r.setting == TREE_LL]
    assert row.verdict == "better" and row.p_value is not None and row.p_value < ALPHA
    assert row.gain == pytest.approx(100 / 70, rel=0.03)
    assert row.gain_ci is not None and 1.05 < row.gain_ci[0] < row.gain < row.gain_ci[1]
    (finding,) = tune_findings(results_of(ms, num_nodes=1))
    assert finding.id == "collectives.tune.recommend" and finding.severity == "info"
    assert finding.fix == f"export {TREE_LL}"
    assert finding.message.startswith(f"NCCL tuning: export {TREE_LL} beat NCCL's defaults on ")
    assert "all_reduce at 32 KiB (1.4" in finding.message
    assert "It applies to every all_reduce size" in finding.message
    # wired into the benchmark's findings
    found = collectives_analysis.findings(results_of(ms, num_nodes=1), Thresholds())
    assert [f.id for f in found] == ["collectives.tune.recommend"]


def test_noise_level_and_sub_threshold_differences_keep_the_defaults() -> None:
    noise = rows_of(TREE_LL, repeats(99.5, n=7))  # 0.5% faster, 1% spread: inside the noise
    small = rows_of(RING_SIMPLE, repeats(97.0, n=7, spread=0.002))  # 3%: certain but too small
    ms = rows_of("default", repeats(100.0, n=14, spread=0.002)) + noise + small
    rows = {r.setting: r for r in tune_rows(ms)}
    assert rows[TREE_LL].verdict == "inside_noise"
    small_row = rows[RING_SIMPLE]
    assert small_row.p_value is not None and small_row.p_value < ALPHA  # (b) holds, (c) does not
    assert small_row.gain_ci is not None and small_row.gain_ci[0] < 1.05
    assert small_row.verdict == "inside_noise"
    assert recommendations(list(rows.values())) == []
    (keep,) = tune_findings(results_of(ms, num_nodes=1))
    best_low = max(r.gain_ci[0] for r in rows.values() if r.gain_ci)
    assert keep.id == "collectives.tune.keep_defaults"
    assert keep.message.startswith(
        f"NCCL tuning: keep the defaults: no setting beat them by more than {best_low - 1:.0%} "
    )
    assert "over 2 settings at 1 op size." in keep.message


def test_a_noisy_setting_is_not_faster_without_the_test() -> None:
    wild = [70.0, 72.0, 150.0, 160.0, 74.0, 170.0, 180.0]  # median 150: not faster overall
    fast_but_spread = [60.0, 62.0, 64.0, 140.0, 145.0, 150.0, 66.0]  # median 66, p too large?
    ms = default() + rows_of(TREE_LL, wild) + rows_of(RING_SIMPLE, fast_but_spread)
    rows = {r.setting: r for r in tune_rows(ms)}
    assert rows[TREE_LL].verdict != "better"
    spread_row = rows[RING_SIMPLE]
    assert spread_row.gain is not None and spread_row.gain > 1.05
    assert spread_row.p_value is not None and spread_row.p_value >= ALPHA
    assert spread_row.verdict == "inside_noise"


def test_an_unconfirmed_setting_is_never_recommended_and_is_named() -> None:
    ms = default() + rows_of(TREE_LL, repeats(50.0, n=7), confirmed=False)
    (row,) = [r for r in tune_rows(ms) if r.setting == TREE_LL]
    assert row.verdict == "unconfirmed" and row.gain is not None and row.gain > 1.9
    ids = [f.id for f in tune_findings(results_of(ms, num_nodes=1))]
    assert ids == ["collectives.tune.keep_defaults", "collectives.tune.unconfirmed"]
    (unconfirmed,) = [f for f in tune_findings(results_of(ms, num_nodes=1)) if f.severity == "warn"]
    assert f"{TREE_LL} (all_reduce)" in unconfirmed.message


def test_faster_small_but_slower_large_is_not_exported() -> None:
    ms = default() + default(size=256 * MIB)
    ms += rows_of(TREE_LL, repeats(60.0, n=7))
    ms += rows_of(TREE_LL, repeats(180.0, n=7), size=256 * MIB)
    assert verdicts(ms)[("all_reduce", TREE_LL, 256 * MIB)] == "slower"
    (keep,) = tune_findings(results_of(ms, num_nodes=1))
    assert keep.id == "collectives.tune.keep_defaults"
    assert f"{TREE_LL}, faster on all_reduce at 32 KiB (1.6" in keep.message
    assert "but slower at 256 MiB (0.5" in keep.message


def test_per_op_recommendations_combine_and_channels_apply_to_every_op() -> None:
    ms = default() + default(op="all_gather")
    ms += rows_of(TREE_LL, repeats(70.0, n=7)) + rows_of(RING_SIMPLE, repeats(80.0, n=7))
    ms += rows_of(AG_RING, repeats(75.0, n=7), op="all_gather")
    ms += rows_of("channels=16", repeats(80.0, n=7)) + rows_of(
        "channels=16", repeats(99.0, n=7), op="all_gather"
    )
    found = {f.evidence["setting"]: f for f in tune_findings(results_of(ms, num_nodes=1))}
    assert set(found) == {TREE_LL, AG_RING, "channels=16"}  # Tree/LL beats Ring/Simple
    assert found["channels=16"].fix.startswith("export NCCL_MIN_CTAS=16 NCCL_MAX_CTAS=16")
    assert "every collective of the communicator" in found["channels=16"].message
    assert found[TREE_LL].fix == (
        f"export {TREE_LL} (with the other recommendations: export "
        'NCCL_ALGO="allreduce:Tree;allgather:Ring" NCCL_PROTO="allreduce:LL;allgather:Simple" '
        "NCCL_MIN_CTAS=16 NCCL_MAX_CTAS=16)"
    )


def test_wrong_results_under_a_setting_fail() -> None:
    ms = default() + rows_of(TREE_LL, repeats(70.0, n=7), num_wrong=12)
    fail = [f for f in tune_findings(results_of(ms, num_nodes=1)) if f.severity == "fail"]
    assert [f.id for f in fail] == ["collectives.tune.wrong_results"]
    assert "12 wrong elements" in fail[0].message
    assert not [f for f in tune_findings(results_of(ms, num_nodes=1)) if "recommend" in f.id]


def test_no_tuning_rows_no_tuning_findings() -> None:
    plain = [m.model_copy(update={"metric": "latency_us"}) for m in default()[:1]]
    assert tune_findings(results_of(plain, num_nodes=1)) == []
    assert tune_grids(plain) == [] and figures_of("collectives", []) == []


# --- the summary's table and the report's figure --------------------------------------------


def sweep_rows() -> list[Measurement]:
    ms = default() + default(size=4 * MIB, centre=400.0)
    ms += rows_of(TREE_LL, repeats(70.0, n=7)) + rows_of(TREE_LL, repeats(401.0, n=7), size=4 * MIB)
    ms += rows_of(RING_SIMPLE, repeats(130.0, n=7), confirmed=False)
    return ms


def test_the_summary_table_gives_each_setting_against_the_default() -> None:
    ms = sweep_rows()
    (grid,) = tune_grids(ms)
    assert grid.title == "NCCL settings against the default, all_reduce (world, 2 ranks, fp32)"
    assert grid.header[:2] == ("size", "setting") and grid.header[-1] == "verdict"
    assert [(row[0], row[1], row[-1]) for row in grid.rows] == [
        ("32 KiB", "default", "NCCL's default"),
        ("32 KiB", TREE_LL, "faster"),
        ("32 KiB", RING_SIMPLE, "not confirmed"),
        ("4 MiB", "default", "NCCL's default"),
        ("4 MiB", TREE_LL, "within the noise"),
    ]
    assert grid.rows[2][6] == "no" and grid.rows[1][6] == "yes"
    assert grid.rows[1][7] == "16 channels"
    assert grid in section(ms, False).grids


def test_the_figure_draws_each_settings_median_with_its_interval_and_marks_the_win() -> None:
    ms = sweep_rows()
    (plot,) = figures_of("collectives", ms)  # checked against plotly's schema and the values
    assert plot.figure["layout"]["yaxis"]["type"] == "log"
    points = [t for t in traces(plot, "measurement") if t["mode"] == "markers"]
    assert [t["name"] for t in points] == ["32 KiB", "4 MiB"]
    small = points[0]
    assert small["x"] == ["default", "Tree/LL", "Ring/Simple"]
    by_setting = {r.setting: r for r in tune_rows(ms) if r.size_bytes == 32 * KIB}
    assert small["y"] == [by_setting[s].latency.value for s in ("default", TREE_LL, RING_SIMPLE)]
    assert small["marker"]["symbol"] == ["diamond", "star", "circle-open"]
    win = by_setting[TREE_LL]
    assert win.latency_ci is not None
    assert small["error_y"]["array"][1] == pytest.approx(win.latency_ci[1] - win.latency.value)
    lines = [t for t in traces(plot, "measurement") if t["mode"] == "lines"]
    assert [set(t["y"]) for t in lines] == [
        {by_setting["default"].latency.value},
        {
            next(
                r.latency.value
                for r in tune_rows(ms)
                if r.size_bytes == 4 * MIB and r.kind == "default"
            )
        },
    ]
    assert plot.table is not None and plot.table.rows[1][0] == "Tree/LL"
    assert C.tune_latency_us.select(ms)  # the figure draws the declared metric's values
