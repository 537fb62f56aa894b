"""The dataloader's worker sweep with real worker processes: the ladder, the stopping rule and a
planted slow step (the rule's logic alone is in tests/unit/test_dataloader_sweep.py)."""

from __future__ import annotations

import pytest
import torch

from clusterbench.analyses.compare.comparison import compare
from clusterbench.benchmarks.dataloader import measure as dl
from clusterbench.benchmarks.sweep_stop import SweepStop
from clusterbench.config import Thresholds
from clusterbench.schema import Measurement, Results, RunInfo, ToolInfo
from tests.helpers import one_rank_ctx
from tests.unit.test_dataloader_sweep import _decoder, _SleepyTokens

# more workers than this machine's cores: the planted samples sleep, they do not compute
pytestmark = [
    pytest.mark.timing,
    pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning"),
]

CPU = torch.device("cpu")
CORES = 4
"""Worker counts 0, 1, 2, 4."""
STEP_S = 0.5
"""The planted slow step: 4 samples per 0.5 s, 8 samples/s.  The loader gives at most 80
without workers (the sleep bounds it, however idle the machine), under the 20 x 8 it would
need; about 80 with one, far above 1.5 x 8 however loaded the machine."""


def _run(**settings: object) -> tuple[list[Measurement], list[SweepStop]]:
    cfg = dl.DataloaderConfig(pin_memory=[False], prefetch_factor=[2], warmup_batches=1,
                              measure_batches=3, train_steps=2, precision="fp32",
                              **settings)  # type: ignore[arg-type]  # fmt: skip
    stops: list[SweepStop] = []
    grid = dl.sweep_settings(cfg, device=CPU, cores=CORES)
    run = dl.measure_input(one_rank_ctx("dataloader"), cfg, dataset_name="tokens",
                           dataset=_SleepyTokens(), workload=_decoder(), settings=grid,
                           batch_size=4, stops=stops)  # fmt: skip
    return list(run), stops


def _rates(ms: list[Measurement]) -> list[tuple[str, object, float]]:
    return [(m.metric, m.params.get("num_workers"), m.value) for m in ms]


def _workers_run(ms: list[Measurement]) -> list[int]:
    return sorted({int(str(m.params["num_workers"])) for m in ms
                   if m.metric == "loader_samples_per_s"})  # fmt: skip


@pytest.fixture(scope="module")
def slow_step() -> tuple[list[Measurement], list[SweepStop]]:
    return _run(step_s=STEP_S)


def test_planted_slow_step_stops_where_the_loader_is_sufficient(
    slow_step: tuple[list[Measurement], list[SweepStop]],
) -> None:
    ms, stops = slow_step
    (step,) = [m for m in ms if m.metric == "step_samples_per_s"]
    assert step.params["step_s"] == STEP_S
    assert 0.5 * 4 / STEP_S < step.value <= 4 / STEP_S * 1.0001  # 4 samples per >= 0.5 s
    assert _workers_run(ms) == [0, 1], _rates(ms)  # 2 and 4 workers never ran
    (stop,) = stops
    assert (stop.reason, stop.last, stop.skipped) == ("sufficient", "1 worker",
                                                      ("2 workers", "4 workers"))  # fmt: skip
    assert "x the step's demand" in stop.detail
    finding = dl.sweep_stop_finding(one_rank_ctx("dataloader"), dl.DataloaderConfig(), stops)
    assert finding.id == "dataloader.sweep_stopped" and finding.severity == "info"
    assert "tokens at 1 worker" in finding.message
    assert "not run: 2 workers, 4 workers" in finding.message
    assert (
        "It stops where the loader delivers 1.5x the samples/s the step consumes" in finding.message
    )
    # the best setting measured (0 or 1 worker: one worker loads no faster) is trained from
    loaders = [m for m in ms if m.metric == "loader_samples_per_s"]
    fastest = max(loaders, key=lambda m: m.value).params["num_workers"]
    best = [m for m in ms if m.metric == "gpu_busy" and m.params["choice"] == "best"]
    assert [m.params["num_workers"] for m in best] == [fastest]


def test_fast_step_goes_further() -> None:
    # the toy step consumes thousands of samples/s: no count is sufficient, and the curve
    # doubles with the workers, so every count up to the cores runs
    ms, stops = _run()
    assert _workers_run(ms) == [0, 1, 2, 4], (_rates(ms), stops)
    assert stops == []
    assert "step_s" not in next(m for m in ms if m.metric == "step_samples_per_s").params


def _results(ms: list[Measurement], run_id: str) -> Results:
    run = RunInfo(id=run_id, started="t", suite="standard", world_size=1, num_nodes=1,
                  backend="gloo", command="c")  # fmt: skip
    return Results(tool=ToolInfo(version="0"), run=run, measurements=ms)


def test_skipped_points_are_missing_not_worse(
    slow_step: tuple[list[Measurement], list[SweepStop]],
) -> None:
    stopped, _ = slow_step
    whole, stops = _run(step_s=STEP_S, sweep_stop=False)
    assert _workers_run(whole) == [0, 1, 2, 4] and stops == []
    comparison = compare(_results(whole, "whole"), _results(stopped, "stopped"), Thresholds())
    skipped = [r for r in comparison.rows if r.params.get("num_workers") in (2, 4)]
    loader_rows = [r for r in skipped if r.metric == "loader_samples_per_s"]
    assert len(loader_rows) == 2 and all(r.verdict == "missing" for r in loader_rows)
    for f in comparison.findings:
        assert all(row["params"].get("num_workers") not in (2, 4)
                   for row in f.evidence["rows"]), f.message  # fmt: skip


def _timed_settings(ms: list[Measurement]) -> list[tuple[int, object]]:
    return [(int(str(m.params["num_workers"])), m.params["prefetch_factor"])
            for m in ms if m.metric == "loader_samples_per_s"]  # fmt: skip


@pytest.mark.parametrize("sweep_stop", [True, False])
def test_ladder_at_one_setting_then_the_variants_at_the_best_count(sweep_stop: bool) -> None:
    # prefetch 2 and 4 at each count: with the rule on, the ladder times prefetch 2 (the lead)
    # and prefetch 4 only at the fastest count; with it off, every setting at every count
    cfg = dl.DataloaderConfig(pin_memory=[False], prefetch_factor=[4, 2], warmup_batches=1,
                              measure_batches=3, train_steps=2, precision="fp32",
                              sweep_stop=sweep_stop)  # fmt: skip
    grid = dl.sweep_settings(cfg, device=CPU, cores=CORES)
    ms = list(dl.measure_input(one_rank_ctx("dataloader"), cfg, dataset_name="tokens",
                               dataset=_SleepyTokens(), workload=_decoder(), settings=grid,
                               batch_size=4, stops=[]))  # fmt: skip
    timed = _timed_settings(ms)
    if not sweep_stop:
        assert sorted(timed, key=str) == sorted(
            [(0, None)] + [(n, pf) for n in (1, 2, 4) for pf in (2, 4)], key=str
        )
        return
    ladder = [t for t in timed if t[1] in (None, 2)]
    assert [n for n, _ in ladder] == [0, 1, 2, 4], timed  # the sleep bounds each worker
    rates = {(int(str(m.params["num_workers"])), m.params["prefetch_factor"]): m.value
             for m in ms if m.metric == "loader_samples_per_s"}  # fmt: skip
    top = max((n for n, _ in ladder), key=lambda n: rates[(n, 2 if n else None)])
    assert [t for t in timed if t[1] == 4] == [(top, 4)], timed
