"""Verdicts on the training benchmark: scaling thresholds, large-model MFU, accumulation idle."""

from __future__ import annotations

import pytest

from clusterbench.benchmarks.training import findings as training
from clusterbench.schema import Finding, Measurement, ParamValue, Results, RunInfo, ToolInfo
from clusterbench.thresholds import Thresholds


def meas(metric: str, value: float, **params: ParamValue) -> Measurement:
    base: dict[str, ParamValue] = {"model": "1.3b", "strategy": "ddp", "precision": "bf16",
                                   "series": "scaling", "world_size": 8}  # fmt: skip
    return Measurement(benchmark="training", metric=metric, value=value, unit="%", rank=0,
                       host="h", device="cuda:0", params={**base, **params})  # fmt: skip


def findings(ms: list[Measurement], *, backend: str = "nccl",
             thresholds: Thresholds | None = None) -> list[Finding]:  # fmt: skip
    run = RunInfo(id="r", started="t", suite="standard", world_size=8, num_nodes=1,
                  backend=backend, command="c")  # fmt: skip
    results = Results(tool=ToolInfo(version="0"), run=run, measurements=ms)
    # the defaults: the seed's 90% / 80% / 40%
    return training.findings(results, thresholds=thresholds or Thresholds())


@pytest.mark.parametrize(
    ("efficiency", "backend", "expected"),
    [(95.0, "nccl", []), (85.0, "nccl", ["warn"]), (70.0, "nccl", ["fail"]),
     (70.0, "gloo", ["info"])],
)  # fmt: skip
def test_scaling_efficiency_thresholds(efficiency: float, backend: str, expected: list) -> None:
    found = findings([meas("scaling_efficiency", efficiency)], backend=backend)
    assert [f.severity for f in found if f.id == "training.scaling_efficiency"] == expected


def test_scaling_warn_follows_the_threshold() -> None:
    at_92 = [meas("scaling_efficiency", 92.0)]
    assert findings(at_92) == []  # above the default 90%
    stricter = Thresholds(given={"scaling_min_efficiency_warn": 0.95})
    [warn] = findings(at_92, thresholds=stricter)
    assert (warn.id, warn.severity) == ("training.scaling_efficiency", "warn")
    assert "below 95%" in warn.message


def test_sweep_cases_are_not_judged() -> None:
    assert findings([meas("scaling_efficiency", 50.0, series="sweep")]) == []


def test_low_mfu_only_for_large_models() -> None:
    [low] = findings([meas("mfu", 30.0), meas("mfu", 45.0), meas("mfu", 10.0, model="125m")])
    assert (low.id, low.severity, low.evidence["mfu_pct"]) == ("training.low_mfu", "warn", 30.0)


def test_accumulation_idle_rising_past_four_steps() -> None:
    def idle(k: int, value: float) -> Measurement:
        return meas("sync_idle_fraction", value, series="grad_accum", grad_accum=k)

    [rising] = findings([idle(1, 20.0), idle(2, 12.0), idle(4, 6.0), idle(8, 9.0)])
    assert rising.severity == "info" and "it rises past 4 steps" in rising.message
    assert rising.fix
    [flat] = findings([idle(1, 20.0), idle(4, 6.0), idle(8, 4.0)])
    assert "does not rise" in flat.message and not flat.fix
    assert findings([idle(1, 20.0), idle(2, 12.0)]) == []  # nothing past four: no verdict
