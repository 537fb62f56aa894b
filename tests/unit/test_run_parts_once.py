"""A run part's analysis is computed once per run: its findings, section and figures, the
console, summary.md and report.html all read the one the run keeps (``run.part``)."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from rich.console import Console

from clusterbench.analyses.placement import facts as placement_facts
from clusterbench.analyses.run import RunAnalysis, analyze
from clusterbench.analyses.soak import drift as soak
from clusterbench.analyses.soak import telemetry as soak_telemetry
from clusterbench.report.console import render_summary
from clusterbench.report.html import render_html
from clusterbench.report.markdown import render_markdown
from clusterbench.schema import (
    Finding,
    HostInfo,
    Measurement,
    Results,
    RunInfo,
    SoakInfo,
    TelemetrySummary,
    TelemetryWindow,
    ToolInfo,
)

T0 = 1_800_000_000.0
ROUND_S = 600.0
ROUNDS = 6


def _gemm(k: int, device: str) -> Measurement:
    return Measurement(benchmark="gemm", metric="tflops", value=800.0 - 20 * k, unit="TFLOP/s",
                       params={"dtype": "bf16", "m": 8192, "n": 8192, "k": 8192},
                       rank=int(device[-1]), host="node0", device=device, round=k,
                       time=T0 + ROUND_S * k)  # fmt: skip


def _window(k: int) -> TelemetryWindow:
    summary = TelemetrySummary(samples=60, window_s=60.0, sm_clock_mhz_median=1980.0 - 40 * k,
                               temp_c_max=60.0 + 4 * k)  # fmt: skip
    return TelemetryWindow(rank=0, host="node0", device="cuda:0", benchmark="gemm", round=k,
                           start=T0 + ROUND_S * k, end=T0 + ROUND_S * k + 60, summary=summary,
                           series="telemetry/rank-00000.csv", source="nvml")  # fmt: skip


def _soak_run() -> Results:
    """A soak of six rounds of two GPUs, one falling, with telemetry and doctor's placement."""
    ranks = [{"rank": r, "local_rank": r, "node": 0, "host": "node0", "gpu": r, "cpus": "0-63",
              "cpu_numa_nodes": [0]} for r in range(2)]  # fmt: skip
    placement = Finding(id="doctor.placement", severity="info", scope="host:node0", message="",
                        evidence={"launcher": "torchrun", "ranks": ranks})  # fmt: skip
    info = SoakInfo(repeat=ROUNDS, rounds=ROUNDS, completed=ROUNDS,
                    round_started=[T0 + ROUND_S * k for k in range(ROUNDS)],
                    round_seconds=[ROUND_S - 1] * ROUNDS)  # fmt: skip
    run = RunInfo(id="s", started="2026-12-01T00:00:00+00:00", suite="quick", world_size=2,
                  num_nodes=1, backend="nccl", command="clusterbench run --repeat 6",
                  benchmarks=["gemm"], soak=info)  # fmt: skip
    return Results(
        tool=ToolInfo(version="0.1.0"),
        run=run,
        hosts=[HostInfo(hostname="node0")],
        measurements=[_gemm(k, d) for k in range(ROUNDS) for d in ("cuda:0", "cuda:1")],
        findings=[placement],
        telemetry=[_window(k) for k in range(ROUNDS)],
    )


def _count(monkeypatch: pytest.MonkeyPatch, counts: Counter[str], fn: Callable[..., Any]) -> None:
    """Count ``fn``'s calls wherever clusterbench holds it (each module that imported it)."""

    def counted(*args: Any, **kwargs: Any) -> Any:
        counts[fn.__name__] += 1
        return fn(*args, **kwargs)

    for name, module in list(sys.modules.items()):
        if name.startswith("clusterbench") and getattr(module, fn.__name__, None) is fn:
            monkeypatch.setattr(module, fn.__name__, counted)


def test_a_soak_runs_analysis_is_computed_once_for_every_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts: Counter[str] = Counter()
    for fn in (soak.soak_series, soak.drift_of, soak_telemetry.round_telemetry,
               placement_facts.placements):  # fmt: skip
        _count(monkeypatch, counts, fn)
    results = _soak_run()
    run = RunAnalysis(results)
    results.findings = [*results.findings, *analyze(run)]  # as the finish does
    render_summary(run, Console(file=StringIO(), width=120))
    markdown, html = render_markdown(run), render_html(run)
    assert "## soak" in markdown and "SM clock over the soak" in html
    assert "placement: where each rank ran" in markdown
    series = 2  # one per GPU, each judged once
    assert counts == {"soak_series": 1, "round_telemetry": 1, "placements": 1, "drift_of": series}


def test_each_part_is_computed_from_what_the_part_is_given() -> None:
    """The soak part (every round) sees the whole run; the others one round."""
    run = RunAnalysis(_soak_run())
    assert run.part("soak") is run.part("soak")
    assert {len(s.rounds) for s in run.part("soak").series} == {ROUNDS}
    assert [w.round for w in run.part("telemetry").summarised] == [ROUNDS - 1]
    with pytest.raises(ValueError, match="computes nothing"):
        run.part("outliers")
