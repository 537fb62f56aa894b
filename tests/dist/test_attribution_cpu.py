"""The attribution benchmark through the real launcher on 2 gloo workers: each planted cause
must come out as the dominant class (or, for a delayed rank, as the straggler)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cpu_run
from clusterbench.schema import Results

pytestmark = pytest.mark.dist

CLASSES = ("compute", "memory", "communication", "coordination")


def run_attribution(out: Path, *sets: str, returncode: int = 0) -> Results:
    """Run it; exit status 1 would mean a fail finding was made."""
    return cpu_run(out, "attribution", sets, timeout=120, returncodes=(returncode,))


def shares(results: Results) -> dict[str, float]:
    """The mean over ranks of each class; the four classes sum to 100 for every rank, both
    for the mean over the profiled steps and for each step on its own."""
    by_rank: dict[int, dict[str, float]] = {}
    by_step: dict[tuple[int, object], dict[str, float]] = {}
    for m in results.measurements:
        if m.benchmark == "attribution" and m.metric in CLASSES:
            assert m.unit == "%"
            by_step.setdefault((m.rank, m.params["rank_step"]), {})[m.metric] = m.value
            if m.params["rank_step"] == "mean":
                by_rank.setdefault(m.rank, {})[m.metric] = m.value
    assert set(by_rank) == {0, 1}
    assert len(by_step) > 2  # the mean and at least one step per rank
    for classes in [*by_rank.values(), *by_step.values()]:
        assert sum(classes.values()) == pytest.approx(100.0, abs=0.01)
    return {c: statistics.fmean(r[c] for r in by_rank.values()) for c in CLASSES}


def verdict(results: Results) -> str:
    [finding] = [f for f in results.findings if f.id == "attribution.verdict"]
    return str(finding.evidence["bound"])


def assert_bound(results: Results, bound: str) -> None:
    s = shares(results)
    assert max(s, key=lambda c: s[c]) == bound, s
    assert verdict(results) == bound


def test_sleeping_input_is_coordination_bound(tmp_path: Path) -> None:
    results = run_attribution(
        tmp_path / "run", "attribution.model=tiny", "attribution.input_delay_ms=60"
    )
    assert_bound(results, "coordination")
    traces = sorted(p.name for p in (tmp_path / "run" / "traces").iterdir())
    assert traces == ["rank-00000.pt.trace.json.gz", "rank-00001.pt.trace.json.gz"]
    metrics = {m.metric for m in results.measurements if m.benchmark == "attribution"}
    assert {"step_time_ms", "profiler_overhead_pct", "communication_exposed",
            "communication_overlapped", "collective_start_spread_ms"} <= metrics  # fmt: skip


def test_delayed_rank_is_named_straggler(tmp_path: Path) -> None:
    results = run_attribution(
        tmp_path / "run", "attribution.model=tiny", "attribution.delay_rank=1",
        "attribution.delay_ms=60", "attribution.keep_traces=false",
    )  # fmt: skip
    [straggler] = [f for f in results.findings if f.id == "attribution.straggler"]
    # two CPU ranks share one host's cores: named, but only as info (GPU ranks: fail)
    assert straggler.severity == "info" and straggler.evidence["rank"] == 1
    assert "Rank 1" in straggler.message and "cpu:1" in straggler.message
    assert not (tmp_path / "run" / "traces").exists()  # traces not kept: written to scratch


def test_large_gradients_over_gloo_are_communication_bound(tmp_path: Path) -> None:
    assert_bound(run_attribution(tmp_path / "run", "attribution.model=comm_heavy"), "communication")


def test_gemm_heavy_model_is_compute_bound(tmp_path: Path) -> None:
    results = run_attribution(tmp_path / "run", "attribution.model=gemm_heavy")
    assert_bound(results, "compute")  # and exit 0: no fail finding, no judged straggler
