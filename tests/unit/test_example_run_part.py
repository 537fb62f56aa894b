"""A run-wide analysis of one's own is one package plus one declaration:
``tests/example_run_part`` declares ``device coverage`` (compute, findings, section) and nothing
in clusterbench names it.  Registered, its analysis is computed once per run, its findings join
``analyze``'s and its section ``summary_sections``'."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from types import ModuleType

import pytest

from clusterbench import registry
from clusterbench.analyses.run import RunAnalysis, analyze, summary_sections
from clusterbench.schema import Finding, Results
from tests.synthetic_cluster import cluster_results

_PACKAGE = "tests.example_run_part"


@pytest.fixture
def part(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The example package, its run part registered for this test only (the run parts as they
    were afterwards)."""
    monkeypatch.setattr(registry, "_RUN_PARTS", dict(registry._RUN_PARTS))
    package = importlib.import_module(_PACKAGE)
    registry.register_run_part(package.RUN_PART)
    yield package


@pytest.fixture
def compute_calls(monkeypatch: pytest.MonkeyPatch, part: ModuleType) -> list[Results]:
    """The results each call of the part's ``compute`` was given."""
    module = importlib.import_module(f"{_PACKAGE}.compute")
    calls: list[Results] = []
    real = module.coverage

    def counted(results: Results, run: object) -> object:
        calls.append(results)
        return real(results, run)

    monkeypatch.setattr(module, "coverage", counted)  # the declaration names it, looked up per call
    return calls


def _ours(findings: list[Finding]) -> list[tuple[str, str, str, str]]:
    return [
        (f.id, f.severity, f.scope, f.message) for f in findings if f.id.startswith("coverage.")
    ]


def test_it_is_not_registered_until_registered() -> None:
    assert "device coverage" not in {p.name for p in registry.run_parts()}


def test_its_compute_runs_once_and_its_findings_and_section_read_it(
    part: ModuleType, compute_calls: list[Results]
) -> None:
    run = RunAnalysis(cluster_results(num_hosts=4, gpus_per_host=2))
    assert _ours(analyze(run)) == [
        ("coverage.all_measured", "info", "run", "every GPU measured: 8 on 4 hosts")
    ]
    sections = {s.benchmark: s for s in summary_sections(run)}
    [grid] = sections["device coverage"].grids
    assert grid.title == "device coverage: GPUs measured per host"
    assert grid.rows[0] == ("gpu-node-000", "2", "2")
    assert len(grid.rows) == 4
    assert run.part("device coverage") == [
        part.HostCoverage(host=f"gpu-node-{i:03d}", num_gpus=2, num_measured=2) for i in range(4)
    ]
    assert len(compute_calls) == 1
    assert [s.benchmark for s in run.sections][-1] == "device coverage"  # after the built-in ones
    assert len(compute_calls) == 1


def test_a_gpu_that_measured_nothing_is_a_warning(
    part: ModuleType, compute_calls: list[Results]
) -> None:
    results = cluster_results(num_hosts=4, gpus_per_host=2)
    results.measurements = [
        m for m in results.measurements if (m.host, m.device) != ("gpu-node-002", "cuda:1")
    ]
    run = RunAnalysis(results)
    assert _ours(analyze(run)) == [
        (
            "coverage.unmeasured_gpus",
            "warn",
            "host:gpu-node-002",
            "1 of 2 GPUs measured nothing",
        )
    ]
    [grid] = next(s for s in summary_sections(run) if s.benchmark == "device coverage").grids
    assert grid.rows[0] == ("gpu-node-002", "2", "1")  # the least covered first
    assert len(compute_calls) == 1
