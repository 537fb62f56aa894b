"""The comparison of two runs: matching, the decision rule and its findings (synthetic Results)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench import catalog  # noqa: F401  (declares the built-in metrics)
from clusterbench.analyses.compare.comparison import (
    Comparison,
    ComparisonRow,
    compare,
    metadata_diff,
)
from clusterbench.analyses.compare.noise import log_spread
from clusterbench.schema import (
    GpuInfo,
    HostInfo,
    Measurement,
    ParamValue,
    Results,
    RunInfo,
    Stats,
    ToolInfo,
    load_results,
)
from clusterbench.thresholds import Thresholds, practical_floor

DATA = Path(__file__).resolve().parents[1] / "data"
T = Thresholds()


def samples(centre: float, n: int = 25, spread: float = 0.005) -> list[float]:
    """``n`` values evenly spread over ``centre`` x (1 +- spread)."""
    return [centre * (1 - spread + 2 * spread * i / (n - 1)) for i in range(n)]


def meas(
    value: float,
    *,
    metric: str = "tflops_best",
    benchmark: str = "gemm",
    unit: str = "TFLOP/s",
    params: dict[str, ParamValue] | None = None,
    device: str = "cuda:0",
    host: str = "h1",
    values: list[float] | None = None,
) -> Measurement:
    stats = Stats.from_samples(values) if values is not None else None
    return Measurement(
        benchmark=benchmark, metric=metric, value=value, unit=unit,
        params={"dtype": "bf16"} if params is None else params,
        rank=0, host=host, device=device, stats=stats,
    )  # fmt: skip


def results(
    *ms: Measurement,
    host: str = "h1",
    gpu: str = "NVIDIA H200",
    versions: dict[str, str] | None = None,
    run_id: str = "r",
    config: dict[str, object] | None = None,
    benchmarks: list[str] | None = None,
) -> Results:
    return Results(
        tool=ToolInfo(version="0.1.0"),
        run=RunInfo(id=run_id, started="2026-12-01T00:00:00+00:00", suite="quick",
                    world_size=1, num_nodes=1, backend="nccl", command="clusterbench run",
                    config=config or {}, benchmarks=benchmarks or ["gemm"]),
        hosts=[HostInfo(hostname=host, gpus=[GpuInfo(index=0, name=gpu)],
                        versions=versions or {"torch": "2.11.0", "driver": "580.1"})],
        measurements=list(ms),
    )  # fmt: skip


def only_row(c: Comparison) -> ComparisonRow:
    assert len(c.rows) == 1, c.rows
    return c.rows[0]


def gemm_pair(base: float, new: float, *, spread: float = 0.005) -> Comparison:
    b = results(meas(base, values=samples(base, spread=spread)))
    n = results(meas(new, values=samples(new, spread=spread)), run_id="n")
    return compare(b, n, T)


def test_identical_results_have_no_regression() -> None:
    r = results(
        meas(790.0, values=samples(790.0)),
        meas(12.0, benchmark="collectives", metric="latency_us", unit="us",
             params={"op": "all_reduce", "size_bytes": 8}, values=samples(12.0, spread=0.2)),
    )  # fmt: skip
    c = compare(r, r, T)
    assert [row.verdict for row in c.rows] == ["unchanged", "unchanged"]
    assert c.findings == [] and c.metadata == [] and not c.failed


def test_a_small_change_stays_inside_the_practical_limit_even_when_significant() -> None:
    row = only_row(gemm_pair(790.0, 770.0))  # -2.5%, the samples do not overlap
    assert row.verdict == "unchanged" and row.reason == "within_limit"
    assert row.p_value is not None and row.p_value < 1e-6


def test_beyond_the_limit_and_the_noise_is_a_regression_warn_then_fail() -> None:
    warn = only_row(gemm_pair(790.0, 660.0))  # -16%
    assert (warn.verdict, warn.severity, warn.direction) == ("regression", "warn", "higher")
    assert warn.change == pytest.approx(-130 / 790)
    # -24% > regression_fail_rel, but the repeats alone never fail: a warning
    alone = gemm_pair(790.0, 600.0)
    assert only_row(alone).severity == "warn" and not alone.failed
    # with three steady earlier runs (the run-to-run noise known) it fails
    steady = [results(meas(v), run_id=f"p{i}") for i, v in enumerate((788.0, 791.0, 793.0))]
    b = results(meas(790.0, values=samples(790.0)))
    fail = compare(b, results(meas(600.0, values=samples(600.0)), run_id="n"), T, previous=steady)
    assert only_row(fail).severity == "fail" and fail.failed
    [finding] = fail.findings
    assert finding.id == "regression.gemm.tflops_best" and finding.severity == "fail"
    assert finding.scope == "host:h1"
    evidence = finding.evidence["rows"][0]
    assert evidence["base"] == 790.0 and evidence["new"] == 600.0 and evidence["p_value"] < 0.01
    up = only_row(gemm_pair(660.0, 790.0))
    assert up.verdict == "improvement" and up.severity is None


def test_on_a_gpu_the_repeats_alone_judge_only_changes_beyond_15_percent() -> None:
    # -11%, p far below alpha: without earlier runs this may be the run-to-run swing
    row = only_row(gemm_pair(790.0, 700.0))
    assert row.verdict == "unchanged" and row.reason == "noise_unknown"
    assert row.p_value is not None and row.p_value < T.regression_alpha
    assert "within ±15%" in row.noise
    # with three earlier runs within 1% of each other the same change is a regression
    b = results(meas(790.0, values=samples(790.0)))
    n = results(meas(700.0, values=samples(700.0)), run_id="n")
    previous = [results(meas(v), run_id=f"p{i}") for i, v in enumerate((788.0, 791.0, 793.0))]
    judged = only_row(compare(b, n, T, previous=previous))
    assert (judged.verdict, judged.severity) == ("regression", "warn")


def test_a_change_inside_the_repeats_noise_is_not_a_regression() -> None:
    row = only_row(gemm_pair(790.0, 700.0, spread=0.4))  # +-40% repeats overlap
    assert row.verdict == "unchanged" and row.reason == "inside_noise"
    assert row.p_value is not None and row.p_value >= T.regression_alpha


def test_without_repeats_or_history_the_noise_is_unknown() -> None:
    b, n = results(meas(790.0)), results(meas(500.0), run_id="n")
    row = only_row(compare(b, n, T))
    assert row.verdict == "unchanged" and row.reason == "noise_unknown"
    assert "noise unknown" in row.noise
    # three repeats each cannot reach p < 0.01 (smallest p is 0.1): unknown too
    b3 = results(meas(790.0, values=[789.0, 790.0, 791.0]))
    n3 = results(meas(500.0, values=[499.0, 500.0, 501.0]), run_id="n")
    row3 = only_row(compare(b3, n3, T))
    assert row3.reason == "noise_unknown" and "cannot reach" in row3.noise


def test_history_gives_the_run_to_run_noise() -> None:
    b = results(meas(790.0, values=samples(790.0)))
    n = results(meas(700.0, values=samples(700.0)), run_id="n")
    noisy = [results(meas(v), run_id=f"p{i}") for i, v in enumerate((790.0, 640.0, 720.0, 850.0))]
    row = only_row(compare(b, n, T, previous=noisy))
    assert row.reason == "inside_noise" and "over 4 earlier runs" in row.noise
    steady = [results(meas(v), run_id=f"p{i}") for i, v in enumerate((788.0, 792.0, 790.0))]
    assert only_row(compare(b, n, T, previous=steady)).verdict == "regression"
    # no repeats at all: history alone decides
    b0, n0 = results(meas(790.0)), results(meas(700.0), run_id="n")
    assert only_row(compare(b0, n0, T, previous=steady)).verdict == "regression"
    assert only_row(compare(b0, n0, T, previous=steady[:2])).reason == "noise_unknown"


def test_few_earlier_runs_count_the_one_that_strayed() -> None:
    """Of three earlier runs two alike give a MAD of 0; their standard deviation takes in the
    third, so an honest rerun of the slow one is not an improvement (a CPU pass saw this:
    +54% on one worker against runs of 1.0, 0.65 and 1.0)."""
    kw: dict = {"device": "cpu:0", "metric": "tflops", "params": {"dtype": "fp32", "m": 1024}}
    history = [results(meas(v, **kw), run_id=f"p{i}") for i, v in enumerate((0.10, 0.065, 0.10))]
    slow = results(meas(0.065, values=samples(0.065, n=10), **kw))
    fast = results(meas(0.10, values=samples(0.10, n=10), **kw), run_id="n")
    row = only_row(compare(slow, fast, T, previous=history))
    assert row.verdict == "unchanged" and row.reason == "inside_noise", row
    logs_stdev = 0.2487  # of log(0.10), log(0.065), log(0.10)
    assert log_spread([0.10, 0.065, 0.10]) == pytest.approx(logs_stdev, abs=0.001)
    # ten or more alike but one: the MAD is 0, the standard deviation takes the one in
    many = [0.1] * 9 + [0.065]
    assert 0 < log_spread(many) < logs_stdev  # type: ignore[operator]
    # a real change counts beyond the wider noise: -90% against five runs, one that strayed;
    # against three (a Student t of 2 degrees of freedom) it stays inside: p = 0.02 > 1%
    squeezed = results(meas(0.01, values=samples(0.01, n=10), **kw), run_id="s")
    five = [*history, *(results(meas(v, **kw), run_id=f"q{i}") for i, v in enumerate((0.09, 0.1)))]
    assert only_row(compare(fast, squeezed, T, previous=five)).verdict == "regression"
    row = only_row(compare(fast, squeezed, T, previous=history))
    assert row.verdict == "unchanged" and row.reason == "inside_noise", row
    assert row.p_value == pytest.approx(0.023, abs=0.002)


def test_direction_latency_up_is_worse_and_unit_floor_applies() -> None:
    def latency(base: float, new: float) -> ComparisonRow:
        params = {"op": "all_reduce", "size_bytes": 8, "mode": "blocking"}
        kw: dict = {
            "benchmark": "collectives",
            "metric": "latency_us",
            "unit": "us",
            "params": params,
        }
        b = results(meas(base, values=samples(base), **kw))
        n = results(meas(new, values=samples(new), **kw), run_id="n")
        return only_row(compare(b, n, T))

    assert latency(100.0, 130.0).verdict == "regression"  # +30%, +30 us
    assert latency(100.0, 70.0).verdict == "improvement"
    small = latency(10.0, 13.0)  # +30% but only 3 us: under the 5 us floor
    assert small.verdict == "unchanged" and small.reason == "within_limit"
    assert practical_floor("us", T) == (0.05, 5.0)
    assert practical_floor("ms", T) == (0.05, 50.0)
    assert practical_floor("GB/s", T, device="cpu:0") == (T.regression_min_rel_cpu, 0.0)


def test_metrics_without_a_better_side_are_never_judged() -> None:
    kw: dict = {"metric": "rel_error", "unit": "ratio", "params": {"dtype": "bf16"}}
    b = results(meas(1e-3, values=samples(1e-3), **kw))
    n = results(meas(5e-3, values=samples(5e-3), **kw), run_id="n")
    row = only_row(compare(b, n, T))
    assert row.verdict == "unchanged" and row.reason == "not_judged" and row.direction is None


def test_new_and_missing_rows() -> None:
    b = results(meas(790.0, params={"dtype": "bf16"}), meas(51.0, params={"dtype": "fp32"}))
    n = results(meas(790.0, params={"dtype": "bf16"}), meas(1400.0, params={"dtype": "fp8"}))
    verdicts = {(r.params["dtype"], r.verdict) for r in compare(b, n, T).rows}
    assert verdicts == {("bf16", "unchanged"), ("fp8", "new"), ("fp32", "missing")}


def test_the_best_shape_matches_whatever_shape_wins() -> None:
    b = results(meas(790.0, params={"dtype": "bf16", "m": 4096, "n": 4096, "k": 4096}))
    n = results(meas(795.0, params={"dtype": "bf16", "m": 8192, "n": 8192, "k": 8192}))
    row = only_row(compare(b, n, T))
    assert row.verdict == "unchanged" and row.params["m"] == 8192


def test_match_gpu_compares_two_nodes() -> None:
    b = results(meas(790.0, host="node1", values=samples(790.0)), host="node1")
    n = results(meas(600.0, host="node2", values=samples(600.0)), host="node2", run_id="n")
    by_host = compare(b, n, T)
    assert sorted(r.verdict for r in by_host.rows) == ["missing", "new"]
    row = only_row(compare(b, n, T, match="gpu"))
    assert (row.verdict, row.host, row.base_host, row.gpu) == (
        "regression", "node2", "node1", "NVIDIA H200"
    )  # fmt: skip
    other = results(meas(600.0, host="node2"), host="node2", gpu="NVIDIA H100 80GB HBM3")
    assert sorted(r.verdict for r in compare(b, other, T, match="gpu").rows) == ["missing", "new"]


def test_cpu_workers_need_the_run_to_run_noise() -> None:
    kw: dict = {"device": "cpu:0", "metric": "tflops", "params": {"dtype": "fp32", "m": 1024}}
    b = results(meas(0.09, values=samples(0.09, n=10), **kw))
    n = results(meas(0.045, values=samples(0.045, n=10), **kw), run_id="n")
    row = only_row(compare(b, n, T))  # -50%, p tiny: still unknown on a CPU
    assert row.reason == "noise_unknown" and row.noise.startswith("CPU worker")
    steady = [results(meas(v, **kw), run_id=f"p{i}") for i, v in enumerate((0.088, 0.091, 0.09))]
    assert only_row(compare(b, n, T, previous=steady)).verdict == "regression"
    # -20% beyond the history's noise is still inside the CPU limit (30%)
    n2 = results(meas(0.072, values=samples(0.072, n=10), **kw), run_id="n")
    assert only_row(compare(b, n2, T, previous=steady)).reason == "within_limit"


def test_metadata_diff_names_what_changed_and_the_fix_hint_uses_it() -> None:
    b = results(
        meas(790.0, values=samples(790.0)), config={"benchmarks": {"gemm": {"repeats": 25}}}
    )
    n = results(
        meas(600.0, values=samples(600.0)), versions={"torch": "2.12.0", "driver": "580.1"},
        run_id="n", config={"benchmarks": {"gemm": {"repeats": 30}}},
    )  # fmt: skip
    changes = {m.what: (m.base, m.new) for m in metadata_diff(b, n)}
    assert changes == {
        "torch version": ("2.11.0", "2.12.0"),
        "config benchmarks.gemm.repeats": ("25", "30"),
    }
    [finding] = compare(b, n, T).findings
    assert "torch version: 2.11.0 -> 2.12.0" in finding.fix
    n2 = results(meas(600.0), host="h2", gpu="NVIDIA H100 80GB HBM3", run_id="n")
    whats = {m.what for m in metadata_diff(b, n2)}
    assert {"GPUs", "nodes", "config benchmarks.gemm.repeats"} <= whats
    # a benchmark run on one side only is one line, not each of its settings
    n3 = results(
        meas(790.0), run_id="n", benchmarks=["gemm", "memory"],
        config={"benchmarks": {"gemm": {"repeats": 25}, "memory": {"ops": ["copy"]}}},
    )  # fmt: skip
    assert [str(m) for m in metadata_diff(b, n3)] == ["benchmarks: gemm -> gemm, memory"]


def test_stats_keep_at_most_64_values_in_order() -> None:
    small = Stats.from_samples([3.0, 1.0, 2.0])
    assert small.values == [3.0, 1.0, 2.0]
    big = Stats.from_samples([float(i) for i in range(1000)])
    assert big.samples == 1000 and big.median == 499.5
    assert big.values is not None and len(big.values) == 64
    assert big.values[0] == 0.0 and big.values[-1] == 999.0 and big.values == sorted(big.values)


def test_an_old_results_file_without_values_loads_and_compares() -> None:
    old = load_results(DATA / "results_v1_no_values.json")
    assert old.measurements and all(
        m.stats is None or m.stats.values is None for m in old.measurements
    )
    c = compare(old, old, T)
    assert c.count("unchanged") == len(old.measurements) and not c.findings
    halved = old.model_copy(
        update={
            "measurements": [m.model_copy(update={"value": m.value / 2}) for m in old.measurements]
        }
    )
    rows = compare(old, halved, T).rows
    judged = [r for r in rows if r.direction is not None]
    assert judged and all(r.reason == "noise_unknown" for r in judged)  # no samples, no history


def test_history_of_runs_with_other_settings_is_not_used() -> None:
    b = results(meas(790.0))
    n = results(meas(700.0), run_id="n", config={"benchmarks": {"gemm": {"repeats": 25}}})
    other = {"benchmarks": {"gemm": {"repeats": 50}}}
    steady = [results(meas(v), run_id=f"p{i}", config=other) for i, v in enumerate((789, 790, 791))]
    assert only_row(compare(b, n, T, previous=steady)).reason == "noise_unknown"
    same = [r.model_copy(update={"run": n.run}) for r in steady]
    assert only_row(compare(b, n, T, previous=same)).verdict == "regression"


def test_changes_with_unknown_noise_are_counted_apart_listed_and_named_in_the_headline() -> None:
    import io

    from rich.console import Console

    from clusterbench.report.compare import comparison_markdown, counts_line, render_comparison

    b = results(meas(790.0), meas(4000.0, benchmark="memory", metric="bandwidth", unit="GB/s"))
    n = results(meas(245.0), meas(4010.0, benchmark="memory", metric="bandwidth", unit="GB/s"),
                run_id="n")  # fmt: skip
    c = compare(b, n, T)  # -69% GEMM, no repeats, no history: the noise is unknown
    assert counts_line(c).endswith("1 unchanged, 1 noise unknown")

    def printed(**kw: bool) -> str:
        buf = io.StringIO()
        render_comparison(c, Console(file=buf, width=200), **kw)
        return buf.getvalue()

    out = printed()
    assert "No regressions." not in out and "-69.0%" not in out.replace("−", "-")
    assert "Verdict: no regression beyond the noise, but 1 change(s) beyond the practical " \
           "limit with the noise unknown, 1 of them worse" in out  # fmt: skip
    assert "Not listed: 1 unchanged (1 within the practical limit), 1 noise unknown" in out
    listed = printed(show_all=True).replace("−", "-")
    assert "-69.0%" in listed and "noise unknown" in listed and "(listed above)" in listed
    md = comparison_markdown(c)
    assert "Rows: 0 regression, 0 improvement, 0 new, 0 missing, 1 unchanged, 1 noise unknown" in md
