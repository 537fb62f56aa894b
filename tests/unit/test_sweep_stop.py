"""The plateau rule that ends a sweep, and the gemm shape sweep that uses it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from clusterbench.benchmarks.collectives import CollectivesConfig
from clusterbench.benchmarks.collectives.stop import curve_mode, size_stop
from clusterbench.benchmarks.gemm import GemmConfig
from clusterbench.benchmarks.gemm import measure as gemm_mod
from clusterbench.benchmarks.gemm.measure import gemm
from clusterbench.benchmarks.network.bandwidth_ratio import bandwidth_ratio_findings
from clusterbench.benchmarks.sweep_stop import PlateauRule, flat_run, plateau_stop
from clusterbench.config import build_run_config
from clusterbench.schema import Finding, Measurement, Results, RunInfo, ToolInfo
from tests.helpers import one_rank_ctx


def test_flat_run_counts_points_that_do_not_beat_the_best_before_them() -> None:
    assert flat_run([], tolerance=0.05) == 0
    assert flat_run([10.0], tolerance=0.05) == 0  # the first point is never flat
    assert flat_run([10.0, 10.4, 10.2], tolerance=0.05) == 2
    assert flat_run([10.0, 10.4, 11.0], tolerance=0.05) == 0  # +5.8% over 10.4: not flat
    assert flat_run([10.0, 5.0, 6.0], tolerance=0.05) == 2  # a drop is flat too
    # before ``first`` a point adds to the best but is never flat
    assert flat_run([10.0, 10.0, 10.0], tolerance=0.05, first=2) == 1


def test_plateau_rule() -> None:
    rule = PlateauRule(tolerance=0.05, patience=2)
    assert not rule.reached([1.0, 2.0, 4.0, 4.1])
    assert rule.reached([1.0, 2.0, 4.0, 4.1, 4.0])
    assert rule.describe(points="sizes", figure="busbw") == (
        "2 successive sizes each add less than 5% to the best busbw before them"
    )
    with pytest.raises(ValueError, match="plateau_patience"):
        PlateauRule(tolerance=0.05, patience=0)
    with pytest.raises(ValueError, match="plateau_tolerance"):
        PlateauRule(tolerance=1.0, patience=2)
    points = [("8 B", 1.0), ("1 MiB", 4.0), ("2 MiB", 4.1), ("4 MiB", 4.0)]
    stop = plateau_stop(rule, sweep="all_reduce on world", points=points, rest=["8 MiB"],
                        noun="sizes", unit="GB/s")  # fmt: skip
    assert stop is not None
    assert (stop.last, stop.skipped, stop.best) == ("4 MiB", ("8 MiB",), 4.1)
    assert "4.1 GB/s at 2 MiB" in stop.detail
    assert plateau_stop(rule, sweep="x", points=points, rest=[], noun="sizes", unit="GB/s") is None


SIZES = [48, 16, 96, 32, 80, 64]
"""Cubes given out of order; the sweep runs them by work: 16, 32, 48, 64, 80, 96."""
PLANTED_TFLOPS = [1.0, 2.0, 2.01, 2.03, 1.99, 5.0]
"""TFLOP/s planted per shape in order of work: flat from 48^3 on (within 2% of 2.0 three
times), so the sweep stops after 80^3 and never times 96^3 (which would have been the best)."""


def _planted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each timed shape gets the next planted TFLOP/s; returns the sizes timed, in order."""
    timed: list[int] = []
    real = gemm_mod._time_shape

    def time_shape(ctx, cfg, *, op, dtype, shape, flush):  # type: ignore[no-untyped-def]
        timed.append(shape[0])
        rate = PLANTED_TFLOPS[sorted(SIZES).index(shape[0])]
        seconds = 2.0 * shape[0] ** 3 / (rate * 1e12)
        monkeypatch.setattr(gemm_mod, "time_op", lambda *a, **kw: [seconds] * cfg.repeats)
        return real(ctx, cfg, op=op, dtype=dtype, shape=shape, flush=flush)

    monkeypatch.setattr(gemm_mod, "_time_shape", time_shape)
    return timed


def _gemm(**settings: object) -> Iterator[Measurement | Finding]:
    cfg = GemmConfig(dtypes=["fp32"], shapes=[f"{s}x{s}x{s}" for s in SIZES], warmup=0,
                     repeats=2, **settings)  # type: ignore[arg-type]  # fmt: skip
    return gemm(one_rank_ctx("gemm"), cfg)


def test_gemm_sweep_stops_at_the_plateau(monkeypatch: pytest.MonkeyPatch) -> None:
    timed = _planted(monkeypatch)
    out = list(_gemm())
    assert timed == [16, 32, 48, 64, 80]  # by work; 96^3 never ran
    ms = [m for m in out if isinstance(m, Measurement)]
    (best,) = [m for m in ms if m.metric == "tflops_best"]
    assert best.value == pytest.approx(2.03) and best.params["m"] == 64
    (geo,) = [m for m in ms if m.metric == "tflops_geomean"]
    assert geo.params["num_shapes"] == 5
    (finding,) = [f for f in out if isinstance(f, Finding)]
    assert finding.id == "gemm.sweep_stopped" and finding.severity == "info"
    assert "fp32 at 80x80x80" in finding.message and "not run: 96x96x96" in finding.message
    assert "3 successive shapes (by work) each add less than 2%" in finding.message


def test_gemm_whole_sweep_without_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    timed = _planted(monkeypatch)
    out = list(_gemm(sweep_stop=False))
    assert timed == SIZES  # every shape, in the order given
    assert not [f for f in out if isinstance(f, Finding)]
    (best,) = [m for m in out if isinstance(m, Measurement) and m.metric == "tflops_best"]
    assert best.value == pytest.approx(5.0)


def test_gemm_presets() -> None:
    assert GemmConfig.preset(suite="standard", device_type="cuda").sweep_stop
    assert not GemmConfig.preset(suite="full", device_type="cuda").sweep_stop
    assert not GemmConfig.preset(suite="full", device_type="cpu").sweep_stop


def test_collectives_size_stop_keeps_the_latency_bound_sizes() -> None:
    mib = 2**20
    cfg = CollectivesConfig(plateau_min_bytes=mib)
    sizes = [2**k for k in range(14, 25)]  # 16 KiB .. 16 MiB
    # flat below 1 MiB (a latency plateau) is no stop: those sizes never count
    low = [5.0, 5.0, 5.0, 5.0, 5.0, 5.0]
    assert size_stop(cfg, sweep="s", sizes=sizes, busbw=low) is None
    curve = [*low, 10.0, 10.2, 10.1]  # 1 MiB, 2 MiB, 4 MiB: the last two within 5%
    stop = size_stop(cfg, sweep="all_reduce on world", sizes=sizes, busbw=curve)
    assert stop is not None and stop.last == "4 MiB" and stop.skipped == ("8 MiB", "16 MiB")
    assert size_stop(cfg, sweep="s", sizes=sizes, busbw=[*low, 10.0, 10.2, 11.0]) is None
    assert curve_mode(cfg) == "back_to_back"
    assert curve_mode(CollectivesConfig(modes=["blocking", "graph"])) == "blocking"
    assert curve_mode(CollectivesConfig(modes=["graph"])) is None
    assert curve_mode(CollectivesConfig(sweep_stop=False)) is None
    presets = {
        (suite, device): CollectivesConfig.preset(suite=suite, device_type=device).sweep_stop
        for suite in ("quick", "standard", "full")
        for device in ("cuda", "cpu")
    }
    assert [k for k, on in presets.items() if on] == [("quick", "cuda"), ("standard", "cuda")]


def test_intra_inter_ratio_takes_each_group_at_its_largest_size() -> None:
    # node1's sweep stopped at the plateau at 512 MiB, node0's went on to 2 GiB: both count
    def busbw(group: str, kind: str, size: int, value: float) -> Measurement:
        params = {"op": "all_reduce", "size_bytes": size, "group": group, "group_kind": kind,
                  "mode": "back_to_back", "dtype": "fp32"}  # fmt: skip
        return Measurement(benchmark="collectives", metric="busbw", value=value, unit="GB/s",
                           params=params, rank=0, host="h", device="cuda:0")  # fmt: skip

    mib = 2**20
    ms = [
        busbw("node0", "intra_node", 512 * mib, 250.0),
        busbw("node0", "intra_node", 2048 * mib, 300.0),
        busbw("node1", "intra_node", 128 * mib, 200.0),
        busbw("node1", "intra_node", 512 * mib, 290.0),
        busbw("rail0", "inter_node", 2048 * mib, 25.0),
    ]  # fmt: skip
    run = RunInfo(id="r", started="t", suite="standard", world_size=16, num_nodes=2,
                  backend="nccl", command="c")  # fmt: skip
    (found,) = bandwidth_ratio_findings(Results(tool=ToolInfo(version="0"), run=run,
                                                measurements=ms))  # fmt: skip
    assert found.evidence["intra_node_gbps"] == pytest.approx(295.0)
    assert found.evidence["ratio"] == pytest.approx(295.0 / 25.0, rel=1e-3)


def test_a_soak_runs_every_point_each_round() -> None:
    # rounds are compared figure by figure: a point one round skipped would read as missing
    def stops(**kw: object) -> dict[str, bool]:
        cfg = build_run_config(device_type="cuda", suite="standard",
                               only=["gemm", "collectives", "dataloader"], **kw)  # type: ignore[arg-type]  # fmt: skip
        return {name: s.sweep_stop for name, s in cfg.benchmarks.items()}

    assert stops() == {"gemm": True, "collectives": True, "dataloader": True}
    assert stops(repeat=3) == {"gemm": False, "collectives": False, "dataloader": False}
    on = stops(soak="1h", sets=["gemm.sweep_stop=true"])
    assert on == {"gemm": True, "collectives": False, "dataloader": False}
