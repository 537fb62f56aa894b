"""Soaks: duration parsing, the round policy, rounds read back from the rank records, drift
detection on synthetic series, the one round the rest of the analysis sees, and the report."""

from __future__ import annotations

import random
from pathlib import Path

import plotly.graph_objects as go
import pytest

from clusterbench.analyses.compare.comparison import compare, index_measurements
from clusterbench.analyses.run import analyze, summary_sections
from clusterbench.analyses.soak.drift import MIN_ROUNDS, drift_of, round_noise, soak_series
from clusterbench.analyses.soak.figures import figures as soak_figures
from clusterbench.analyses.soak.findings import findings as soak_findings
from clusterbench.analyses.soak.findings import ranges_text
from clusterbench.analyses.soak.section import section as soak_section
from clusterbench.analyses.soak.section import soak_line
from clusterbench.config import ConfigError, build_run_config
from clusterbench.runtime.records import End, FindingRecord, Record, Start
from clusterbench.runtime.rounds import (
    RoundPolicy,
    last_round,
    round_findings,
    rounds,
    soak_info,
    with_round,
)
from clusterbench.schema import (
    ErrorRecord,
    Finding,
    Measurement,
    Results,
    RunInfo,
    SoakInfo,
    TelemetrySummary,
    TelemetryWindow,
    ToolInfo,
    one_round,
)
from clusterbench.thresholds import Thresholds
from clusterbench.units import parse_duration
from tests.helpers import one_rank_ctx
from tests.pages import analysed

T = Thresholds()
T0 = 1_800_000_000.0  # unix seconds of round 0
ROUND_S = 600.0  # ten minutes a round


# ----------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("30min", 1800), ("2h", 7200), ("1h30m", 5400),
     ("1.5h", 5400), ("600", 600), (" 2H ", 7200)],
)  # fmt: skip
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "2x", "-5s", "1h 30m", "h", "1.s", "nan", "inf", "2h-"])
def test_bad_durations_are_one_line(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration") as info:
        parse_duration(text)
    assert "\n" not in str(info.value)


def test_zero_duration_is_refused() -> None:
    with pytest.raises(ValueError, match="more than 0 s"):
        parse_duration("0s")


def _config(tmp_path: Path | None = None, toml: str = "", **flags: object):  # type: ignore[no-untyped-def]
    path = None
    if tmp_path is not None:
        path = tmp_path / "c.toml"
        path.write_text(toml)
    return build_run_config(device_type="cpu", only=["selftest"], config_file=path, **flags)  # type: ignore[arg-type]


def test_soak_and_repeat_flags_reach_the_config() -> None:
    assert _config(soak="2h").soak_s == 7200
    assert _config(repeat=6).repeat == 6
    assert _config().to_dict().get("soak") is None  # no key outside a soak
    assert _config(repeat=3).to_dict()["soak"] == {"duration_s": None, "repeat": 3}


@pytest.mark.parametrize(
    ("flags", "message"),
    [({"soak": "2h", "repeat": 3}, "--soak and --repeat together"),
     ({"repeat": 0}, "--repeat must be at least 1, got 0"),
     ({"soak": "soon"}, "--soak: 'soon' is not a duration")],
)  # fmt: skip
def test_bad_soak_flags(flags: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(**flags)


def test_config_file_soak_keys_and_flags_replacing_them(tmp_path: Path) -> None:
    assert _config(tmp_path, 'soak = "30m"\n').soak_s == 1800
    assert _config(tmp_path, "repeat = 4\n").repeat == 4
    replaced = _config(tmp_path, 'soak = "30m"\n', repeat=2)
    assert (replaced.soak_s, replaced.repeat) == (None, 2)
    with pytest.raises(ConfigError, match="soak and repeat together"):
        _config(tmp_path, 'soak = "30m"\nrepeat = 2\n')
    with pytest.raises(ConfigError, match=r"c\.toml: soak: 'a while' is not a duration"):
        _config(tmp_path, 'soak = "a while"\n')


# ----------------------------------------------------------------------------- the policy


def test_repeat_runs_exactly_n_rounds() -> None:
    policy = RoundPolicy(repeat=3)
    starts = [policy.start_next(done=k, elapsed_s=1e6, last_round_s=1e6) for k in range(5)]
    assert starts == [True, True, True, False, False]


def test_a_timed_soak_starts_a_round_while_half_a_round_is_left() -> None:
    policy = RoundPolicy(duration_s=100.0)
    assert policy.start_next(done=0, elapsed_s=500.0, last_round_s=None)  # one round always
    assert policy.start_next(done=3, elapsed_s=80.0, last_round_s=30.0)  # 20 s left >= 15
    assert not policy.start_next(done=3, elapsed_s=90.0, last_round_s=30.0)  # 10 s left < 15
    assert not policy.start_next(done=3, elapsed_s=100.0, last_round_s=0.0)  # nothing left


def test_policy_needs_exactly_one_limit() -> None:
    with pytest.raises(ValueError):
        RoundPolicy()
    with pytest.raises(ValueError):
        RoundPolicy(duration_s=10.0, repeat=2)
    with pytest.raises(ValueError):
        RoundPolicy(repeat=0)


class _Clock:
    """A clock that each round advances by its own (given) time."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_rounds_follow_the_policy_on_the_given_round_times() -> None:
    clock = _Clock()
    ctx = one_rank_ctx("selftest")
    ended: list[tuple[int, float]] = []
    times = [40.0, 30.0, 30.0, 30.0]
    seen = []
    for k in rounds(ctx, RoundPolicy(duration_s=100.0), clock=clock,
                    on_round_end=lambda r, s: ended.append((r, s))):  # fmt: skip
        seen.append(k)
        clock.now += times[k]
    # after 3 rounds 100 s have passed: nothing left; after 2 (70 s) 30 s >= half of 30 s
    assert seen == [0, 1, 2]
    assert ended == [(0, 40.0), (1, 30.0), (2, 30.0)]
    assert list(rounds(ctx, None)) == [None]  # outside a soak: one pass, no round


# ----------------------------------------------------------------------------- rank records


def _records(num_rounds: int, *, world: int = 2, last_partial: bool = False) -> list[Record]:
    recs: list[Record] = []
    for rank in range(world):
        seq = 0
        for k in range(num_rounds):
            for bench in ("gemm", "selftest"):
                partial = last_partial and k == num_rounds - 1 and bench == "selftest"
                recs.append(Start(benchmark=bench, round=k, at=T0 + 10 * k, rank=rank, seq=seq))
                seq += 1
                if bench == "gemm":
                    finding = Finding(id="x", severity="info", scope="run", message=f"round {k}")
                    recs.append(FindingRecord(data=finding, rank=rank, seq=seq))
                    seq += 1
                if not partial:
                    recs.append(End(benchmark=bench, seconds=4.0, round=k, rank=rank, seq=seq))
                    seq += 1
    return recs


def test_soak_info_from_the_records() -> None:
    asked = {"duration_s": None, "repeat": 5}
    done = soak_info(_records(3), asked=asked, benchmarks=["gemm", "selftest"], world_size=2,
                     stopped=False)  # fmt: skip
    assert done is not None
    assert (done.rounds, done.completed, done.stopped_in, done.repeat) == (3, 3, None, 5)
    assert done.round_started == [T0, T0 + 10, T0 + 20]
    assert done.round_seconds == [4.0, 4.0, 4.0]
    cut = soak_info(_records(3, last_partial=True), asked=asked,
                    benchmarks=["gemm", "selftest"], world_size=2, stopped=True)  # fmt: skip
    assert cut is not None
    assert (cut.rounds, cut.completed, cut.stopped_in, cut.summary_round) == (3, 2, 2, 1)
    assert cut.round_seconds[-1] is None
    assert soak_info(_records(2), asked=None, benchmarks=["gemm"], world_size=2,
                     stopped=False) is None  # fmt: skip


def test_records_of_the_last_round_and_the_findings_of_one() -> None:
    recs = _records(3, last_partial=True)
    last = last_round(recs)
    assert {r.round for r in last if isinstance(r, Start | End)} == {2}
    assert [f.message for f in round_findings(recs, keep=1)] == ["round 1", "round 1"]
    plain = [r.model_copy(update={"round": None}) if isinstance(r, Start) else r for r in recs]
    assert len(round_findings(plain, keep=None)) == 2 * 3  # outside a soak: every one


def test_errors_name_the_round() -> None:
    message = "rank 1 on host h failed in selftest: RuntimeError: boom"
    err = ErrorRecord(benchmark="selftest", rank=1, host="h", message=message)
    named = with_round([err], _records(4, last_partial=True))
    assert named[0].message == "rank 1 on host h failed in selftest (round 3): RuntimeError: boom"
    assert with_round([err], [])[0].message == err.message


# ----------------------------------------------------------------------------- synthetic runs


def _m(value: float, k: int, *, metric: str = "tflops", device: str = "cuda:0") -> Measurement:
    bench, unit, params = {
        "tflops": ("gemm", "TFLOP/s", {"dtype": "bf16", "m": 8192, "n": 8192, "k": 8192}),
        "sync_time": ("selftest", "s", {}),
    }[metric]
    return Measurement(benchmark=bench, metric=metric, value=value, unit=unit, params=params,
                       rank=int(device[-1]), host="h1", device=device, round=k,
                       time=T0 + ROUND_S * k)  # fmt: skip


def _soak(ms: list[Measurement], *, rounds_: int, completed: int | None = None,
          backend: str = "nccl", status: str = "completed") -> Results:  # fmt: skip
    done = rounds_ if completed is None else completed
    soak = SoakInfo(repeat=rounds_, rounds=rounds_, completed=done,
                    round_started=[T0 + ROUND_S * k for k in range(rounds_)],
                    round_seconds=[ROUND_S - 1] * done + [None] * (rounds_ - done),
                    stopped_in=None if status == "completed" else rounds_ - 1)  # fmt: skip
    return Results(
        tool=ToolInfo(version="0.1.0"),
        run=RunInfo(id="s", started="2026-12-01T00:00:00+00:00", suite="quick", world_size=2,
                    num_nodes=1, backend=backend, command="clusterbench run --repeat",
                    status=status, benchmarks=["gemm"], soak=soak),  # type: ignore[arg-type]
        measurements=ms,
    )  # fmt: skip


def _noisy(level: float, n: int, *, rel: float, seed: int, trend: float = 0.0) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + trend * k) * (1 + rng.gauss(0, rel)) for k in range(n)]


def _drift_ids(results: Results) -> list[Finding]:
    return [f for f in soak_findings(results, analysed(results, T)) if f.id == "soak.drift"]


def test_a_figure_that_falls_is_a_drift() -> None:
    values = _noisy(800.0, 8, rel=0.003, seed=1, trend=-0.02)  # -2% a round, 0.3% noise
    results = _soak([_m(v, k) for k, v in enumerate(values)], rounds_=8)
    found = _drift_ids(results)
    assert len(found) == 1
    f = found[0]
    assert f.severity == "warn" and f.scope == "host:h1/cuda:0"
    assert "gemm.tflops" in f.message and "fell" in f.message and "cuda:0" in f.message
    series = f.evidence["series"][0]
    assert series["first"] > series["last"] and series["slope_per"] == "hour"
    # Theil-Sen per hour: about -2% of 800 every 10 minutes = -96 TFLOP/s an hour
    assert -110 < series["slope"] < -80
    assert series["p_value"] < T.soak_drift_alpha


def test_a_flat_noisy_figure_is_not_a_drift() -> None:
    # 2% noise: the last round of some is more than the 5% limit below the first, but none
    # has a trend beyond chance and beyond the rounds' noise
    falls = 0
    for seed in range(50):
        values = _noisy(800.0, 10, rel=0.02, seed=seed)
        results = _soak([_m(v, k) for k, v in enumerate(values)], rounds_=10)
        assert _drift_ids(results) == [], (seed, values)
        falls += values[-1] < (1 - T.soak_drift_min_rel) * values[0]
    assert falls > 0  # first against last round alone would have called these


def test_a_lower_is_better_figure_that_rises_is_a_drift_and_one_that_falls_not() -> None:
    rising = [0.3 + 0.1 * k + 0.001 * (-1) ** k for k in range(6)]
    results = _soak([_m(v, k, metric="sync_time") for k, v in enumerate(rising)], rounds_=6,
                    backend="gloo")  # fmt: skip
    found = _drift_ids(results)
    assert len(found) == 1 and "rose" in found[0].message
    assert found[0].severity == "info"  # CPU workers: stated, not judged
    falling = list(reversed(rising))
    better = _soak([_m(v, k, metric="sync_time") for k, v in enumerate(falling)], rounds_=6)
    assert _drift_ids(better) == []


def test_a_small_steady_fall_below_the_practical_limit_is_not_a_drift() -> None:
    values = [800.0 * (1 - 0.002 * k) for k in range(10)]  # 1.6% over the soak, noise-free
    d = drift_of(soak_series(_soak([_m(v, k) for k, v in enumerate(values)], rounds_=10))[0], T)
    assert d is not None and d.worse and d.p_value < 0.01 and not d.drifted


def test_too_few_rounds_are_not_tested() -> None:
    values = [800.0, 700.0, 600.0, 500.0]
    results = _soak([_m(v, k) for k, v in enumerate(values)], rounds_=4)
    assert drift_of(soak_series(results)[0], T) is None
    assert MIN_ROUNDS == 5 and _drift_ids(results) == []


def test_round_noise_is_not_inflated_by_a_trend_or_a_step() -> None:
    assert round_noise([10.0 + 2 * k for k in range(8)]) == pytest.approx(0.0)
    assert round_noise([10.0] * 4 + [5.0] * 4) == pytest.approx(0.0)
    rng = random.Random(3)
    white = [rng.gauss(0, 1.0) for _ in range(4000)]
    assert round_noise(white) == pytest.approx(1.0, rel=0.1)


def test_one_series_per_device_and_the_summary() -> None:
    ms = [_m(800.0 - 20 * k, k, device=f"cuda:{d}") for k in range(6) for d in (0, 1)]
    ms += [_m(800.0 + (k % 2), k, device="cuda:2") for k in range(6)]
    results = _soak(ms, rounds_=6)
    assert len(soak_series(results)) == 3
    found = soak_findings(results, analysed(results, T))
    drift = [f for f in found if f.id == "soak.drift"]
    assert len(drift) == 1 and drift[0].evidence["num_series"] == 2  # one per figure
    summary = next(f for f in found if f.id == "soak.summary")
    assert summary.severity == "info"
    assert "6 round(s) started, 6 complete" in summary.message
    assert summary.evidence["figures"]["gemm.tflops"]["num_series"] == 3
    assert summary.evidence["drifted"] == ["gemm.tflops"]


def test_intermittent_figures_and_failures() -> None:
    ms = [_m(800.0, k) for k in (0, 1, 3, 4)]  # missing in round 2
    ms += [_m(0.3, k, metric="sync_time") for k in range(5)]
    found = soak_findings(_soak(ms, rounds_=5), analysed(_soak(ms, rounds_=5), T))
    gaps = [f for f in found if f.id == "soak.intermittent"]
    assert len(gaps) == 1 and gaps[0].severity == "warn"
    assert "gemm.tflops" in gaps[0].message and "round(s) 2 of the 5" in gaps[0].message
    failed = _soak([_m(800.0, k) for k in range(3)], rounds_=4, completed=3, status="failed")
    message = "rank 1 on host h1 failed in gemm (round 3): boom"
    failed.errors = [ErrorRecord(benchmark="gemm", rank=1, host="h1", message=message)]
    fail = [f for f in soak_findings(failed, analysed(failed, T)) if f.id == "soak.intermittent"]
    assert len(fail) == 1 and fail[0].severity == "fail"
    assert "gemm passed round(s) 0-2 of the soak, then failed in round 3 on rank 1" in (
        fail[0].message
    )
    assert ranges_text([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"


def test_no_soak_findings_outside_a_soak() -> None:
    results = _soak([_m(800.0, 0)], rounds_=1)
    results.run.soak = None
    assert soak_findings(results, analysed(results, T)) == []


# ----------------------------------------------------------------------------- one round


def test_one_round_is_the_last_complete_one() -> None:
    ms = [_m(800.0 - k, k) for k in range(4)]
    results = _soak(ms, rounds_=4, completed=3, status="interrupted")
    assert [m.round for m in one_round(results).measurements] == [2]
    assert len(results.measurements) == 4  # the results themselves keep every round
    plain = _soak([_m(800.0, 0)], rounds_=1)
    plain.run.soak = None
    plain.measurements[0].round = None
    assert one_round(plain) is plain
    none_done = _soak([_m(800.0, 0)], rounds_=1, completed=0, status="interrupted")
    assert [m.round for m in one_round(none_done).measurements] == [0]


def test_compare_and_the_benchmarks_see_one_round() -> None:
    ms = [_m(800.0 - 30 * k, k, device=f"cuda:{d}") for k in range(6) for d in range(4)]
    results = _soak(ms, rounds_=6)
    index = index_measurements(results, "host")
    assert len(index) == 4 and {m.round for m in index.values()} == {5}
    # a soak compared with itself: one row a device, none duplicated by the rounds
    assert len(compare(results, results, T).rows) == 4
    sections = summary_sections(results)
    gemm = next(s for s in sections if s.benchmark == "gemm")
    assert all(row.num_devices == 4 for row in gemm.rows)  # not 24: one round's devices
    assert [s.benchmark for s in sections][-1] == "soak"
    ids = [f.id for f in analyze(results, T)]
    assert ids.count("soak.drift") == 1 and not any(i.startswith("outlier.") for i in ids)


# ----------------------------------------------------------------------------- report


def _with_telemetry(results: Results) -> Results:
    windows = [
        TelemetryWindow(rank=0, host="h1", device="cuda:0", benchmark="gemm", round=k,
                        start=T0 + ROUND_S * k, end=T0 + ROUND_S * k + 60,
                        summary=TelemetrySummary(samples=60, window_s=60.0,
                                                 sm_clock_mhz_median=1980.0 - 40 * k,
                                                 temp_c_max=60.0 + 4 * k),
                        series="telemetry/rank-00000.csv", source="nvml")
        for k in range(6)
    ]  # fmt: skip
    return results.model_copy(update={"telemetry": windows})


def test_soak_section_line_and_figures() -> None:
    ms = [_m(800.0 - 20 * k, k) for k in range(6)]
    ms += [_m(0.3 + 0.001 * (k % 2), k, metric="sync_time") for k in range(6)]
    results = _with_telemetry(_soak(ms, rounds_=6))
    section = soak_section(results, analysed(results))
    assert section is not None and section.benchmark == "soak"
    table, telemetry = section.grids
    assert table.rows[0][0].startswith("gemm.tflops") and table.rows[0][-1] == "drift"
    assert table.rows[1][0] == "selftest.sync_time" and table.rows[1][-1] != "drift"
    assert telemetry.rows == [("cuda:0", "6", "1980", "1780", "-10.1%", "60", "80")]
    line = soak_line(analysed(results))
    assert line.startswith("soak: 6 rounds, 6 complete") and "drift: gemm.tflops on cuda:0" in line
    plots = soak_figures(results, analysed(results))
    assert [p.title for p in plots][-1] == "SM clock over the soak's rounds"
    for plot in plots:
        go.Figure(plot.figure)  # plotly's own schema accepts it
    assert plots[0].figure["data"][0]["y"] == [m.value for m in ms[:6]]
    summary = next(
        f for f in soak_findings(results, analysed(results, T)) if f.id == "soak.summary"
    )
    assert "SM clock cuda:0 of h1 1980 -> 1780 MHz (-10%), up to 80 C" in summary.message
    assert summary.evidence["telemetry"]["h1/cuda:0"]["temp_c_max"][-1] == 80.0
    # the benchmarks' own view keeps one round of the telemetry windows too
    assert [w.round for w in one_round(results).telemetry] == [5]


def test_the_findings_the_finish_adds_are_in_the_soak_round_the_pages_read() -> None:
    from clusterbench.analyses.run import RunAnalysis

    results = _soak([_m(1000.0 - k, k) for k in range(3)], rounds_=3)
    run = RunAnalysis(results)
    assert run.one_round.findings == []  # read before the analysis: a copy of one round
    added = Finding(id="x", severity="warn", scope="run", message="added", fix="")
    results.findings = [added]  # as finish() adds the analysis' findings
    assert run.one_round.findings == [added]
    assert {m.round for m in run.one_round.measurements} == {2}
