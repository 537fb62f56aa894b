"""A new benchmark is its own folder plus one registration: ``tests/example_benchmark/``
declares and registers ``tiny`` and nothing else in clusterbench names it; here it is selected and tuned
through the config, run by the real launcher on two CPU workers, analysed and rendered."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from tests.example_benchmark import BENCHMARK as TINY
from tests.example_benchmark import TinyMetrics

import clusterbench
from clusterbench import registry
from clusterbench.config import ConfigError
from clusterbench.report.console import render_summary
from tests.pages import analysis

pytestmark = pytest.mark.dist


def test_a_registered_benchmark_runs_is_analysed_and_rendered(tmp_path: Path) -> None:
    assert registry.get("tiny") is TINY
    out = tmp_path / "run"
    outcome = clusterbench.run(
        clusterbench.RunOptions(
            only=["tiny"], sets=["tiny.size=256"], device="cpu", nproc=2, out=out, timeout_s=120
        )
    )
    results = outcome.results
    assert results is not None and results.run.status == "completed", results
    assert outcome.exit_code == 0
    rates = TinyMetrics.elements_per_s.select(results)
    assert sorted(m.rank for m in rates) == [0, 1]
    assert all(m.unit == "elements/s" and m.params == {"size": 256} and m.value > 0 for m in rates)
    assert [m.value for m in TinyMetrics.wrong.select(results)] == [0.0, 0.0]
    assert [f.id for f in results.findings] == ["tiny.rate"]
    assert results.run.config["benchmarks"]["tiny"] == {"size": 256, "repeats": 5}
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "## tiny" in summary and "all-reduce of 256 ones" in summary
    buf = io.StringIO()
    render_summary(analysis(results), Console(file=buf, width=160))
    assert "all-reduce of 256 ones" in buf.getvalue()


def test_its_settings_are_checked_like_any_other() -> None:
    with pytest.raises(ConfigError, match=r"tiny\.size"):
        clusterbench.run(clusterbench.RunOptions(only=["tiny"], sets=["tiny.size=0"], device="cpu"))
    with pytest.raises(ConfigError, match="unknown key"):  # keywords build the options too
        clusterbench.run(only=["tiny"], sets=["tiny.nosuch=1"], device="cpu")
    assert "tiny" not in registry.suite_benchmarks("standard")  # in no suite: only --only runs it
