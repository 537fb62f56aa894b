"""The dataloader verdicts agree with the sweep: one verdict from its measured winner.

When PyTorch's defaults (no workers) were the fastest setting measured, no finding advises
more workers; when a setting with workers was faster, the advice names it and its rate.
"""

from __future__ import annotations

from clusterbench.benchmarks.dataloader import findings as dataloader_analysis
from clusterbench.schema import Finding, Measurement, ParamValue, Results, RunInfo, ToolInfo
from clusterbench.thresholds import Thresholds


def _m(metric: str, value: float, **params: ParamValue) -> Measurement:
    unit = "%" if metric == "gpu_busy" else "samples/s"
    return Measurement(
        benchmark="dataloader",
        metric=metric,
        value=value,
        unit=unit,
        params={"dataset": "images", **params},
        rank=0,
        host="h1",
        device="cuda:0",
    )


def _loader(workers: int, value: float) -> Measurement:
    pin = workers > 0
    prefetch = 2 if workers else None
    return _m(
        "loader_samples_per_s",
        value,
        num_workers=workers,
        pin_memory=pin,
        prefetch_factor=prefetch,
        batch_size=64,
    )


def _busy(workers: int, value: float, choice: str) -> Measurement:
    return _m(
        "gpu_busy",
        value,
        num_workers=workers,
        pin_memory=workers > 0,
        prefetch_factor=2 if workers else None,
        choice=choice,
    )


def _findings(ms: list[Measurement]) -> list[Finding]:
    run = RunInfo(
        id="r",
        started="t",
        suite="standard",
        world_size=1,
        num_nodes=1,
        backend="nccl",
        command="c",
    )
    res = Results(tool=ToolInfo(version="0"), run=run, measurements=ms)
    return dataloader_analysis.findings(res, Thresholds())


STEP = _m("step_samples_per_s", 3000.0, model="resnet50", batch_size=64)


def _text(findings: list[Finding]) -> str:
    return " ".join(f"{f.message} {f.fix}" for f in findings)


def test_defaults_measured_best_give_no_advice_to_add_workers() -> None:
    # the sweep: 0 workers 1,100 samples/s beats 4 workers (900) and 8 (700); all below the step
    ms = [STEP, _loader(0, 1100.0), _loader(4, 900.0), _loader(8, 700.0), _busy(0, 35.0, "best")]
    findings = _findings(ms)
    assert [f.id for f in findings] == ["dataloader.input_bound"]
    text = _text(findings)
    assert "num_workers > 0" not in text and "Set num_workers" not in text
    [bound] = findings
    assert "did not help" in bound.fix and "PyTorch's default" in bound.fix
    assert "num_workers=0, pin_memory=False, prefetch_factor=None: 1,100 samples/s" in bound.fix
    assert "num_workers=4, pin_memory=True, prefetch_factor=2: 900 samples/s" in bound.fix
    assert bound.evidence["best_loader"]["num_workers"] == 0
    assert (
        bound.evidence["loader_sweep"]["num_workers=8, pin_memory=True, prefetch_factor=2"] == 700
    )


def test_workers_measured_best_are_the_advice() -> None:
    # defaults too slow for the step, 8 workers fast enough: the busy device at 8 is fine
    ms = [
        STEP,
        _loader(0, 1100.0),
        _loader(4, 2600.0),
        _loader(8, 3400.0),
        _busy(8, 97.0, "best"),
        _busy(0, 36.0, "default"),
    ]
    findings = _findings(ms)
    assert [f.id for f in findings] == ["dataloader.slow_default_loader"]
    [slow] = findings
    assert "1,100 samples/s, below the 3,000 samples/s" in slow.message
    assert (
        "num_workers=8, pin_memory=True, prefetch_factor=2, delivers 3,400 samples/s"
        in slow.message
    )
    fix = "Set num_workers=8, prefetch_factor=2, pin_memory=True in the DataLoader"
    assert slow.fix == f"{fix} (the sweep's best here)."
    assert slow.evidence["best_loader_samples_per_s"] == 3400.0


def test_workers_best_but_still_input_bound_name_the_same_winner() -> None:
    ms = [
        STEP,
        _loader(0, 1100.0),
        _loader(4, 1500.0),
        _busy(4, 50.0, "best"),
        _busy(0, 36.0, "default"),
    ]
    findings = {f.id: f for f in _findings(ms)}
    assert set(findings) == {"dataloader.input_bound", "dataloader.slow_default_loader"}
    winner = "num_workers=4, pin_memory=True, prefetch_factor=2"
    assert winner in findings["dataloader.input_bound"].fix
    assert findings["dataloader.input_bound"].fix.startswith("Use the sweep's best")
    assert "Set num_workers=4" in findings["dataloader.slow_default_loader"].fix
    assert "did not help" not in _text(list(findings.values()))


def test_defaults_fast_enough_say_nothing() -> None:
    ms = [STEP, _loader(0, 5000.0), _loader(4, 6000.0), _busy(4, 99.0, "best")]
    assert _findings(ms) == []
