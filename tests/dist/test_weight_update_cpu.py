"""weight_update and memory through the real launcher on 2 gloo workers: every rank measures
every optimizer and layout of the training workload's model, and the findings set the update
against the copy the memory benchmark measured on the same device."""

from __future__ import annotations

import pytest

from clusterbench.analyses.run import report_plots, summary_sections
from clusterbench import catalog, registry
from clusterbench.benchmarks.weight_update.optimizers import LAYOUTS, OPTIMIZERS
from clusterbench.schema import Results
from tests.helpers import cpu_run
from tests.unit.test_report_figures import check_figure, traces

pytestmark = pytest.mark.dist


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Results:
    catalog.register_builtin()
    out = tmp_path_factory.mktemp("weight_update") / "run"
    return cpu_run(out, "memory,weight_update", timeout=180)


def test_every_rank_measures_every_optimizer_and_layout(results: Results) -> None:
    bandwidth = [m for m in results.measurements if m.metric == "bandwidth"]
    updates = [m for m in bandwidth if m.benchmark == "weight_update"]
    for rank in (0, 1):
        mine = [m for m in updates if m.rank == rank]
        assert {(m.params["optimizer"], m.params["layout"]) for m in mine} == {
            (o, lay) for o in OPTIMIZERS for lay in LAYOUTS
        }
        assert {m.device for m in mine} == {f"cpu:{rank}"}
        for m in mine:
            assert m.params["model"] == "tiny" and m.unit == "GB/s"
            # positive and below anything a CPU moves: 1 TB/s
            assert 0 < m.value < 1000 and m.stats is not None and m.stats.samples == 5
    checks = [m for m in results.measurements if m.metric == "update_rel_error"]
    assert len(checks) == len(updates)
    assert all(0 <= m.value < float(m.params["tolerance"]) for m in checks)  # type: ignore[arg-type]


def test_the_share_of_hbm_is_found_against_the_memory_copy(results: Results) -> None:
    reach = [f for f in results.findings if f.id == "weight_update.hbm_fraction"]
    assert [f.evidence["layout"] for f in reach] == list(LAYOUTS)
    copies = [
        m.value
        for m in results.measurements
        if m.benchmark == "memory" and m.params.get("op") == "copy"
    ]
    for f in reach:
        assert f.severity == "info" and f.evidence["num_devices"] == 2
        assert min(copies) <= f.evidence["hbm_copy_gbps"] <= max(copies)
        assert "% of HBM (the bottleneck-analysis paper saw" in f.message
        assert "the memory benchmark's copy reached" in f.message
        for summary in f.evidence["optimizers"].values():
            assert summary["hbm_fraction"] > 0 and summary["spec_fraction"] is None  # no spec
    assert [
        f.evidence["family"] for f in results.findings if f.id.endswith("fused_vs_foreach")
    ] == [
        "adamw",
        "sgd",
    ]


def test_the_summary_and_the_figure(results: Results) -> None:
    ms = [m for m in results.measurements if m.benchmark == "weight_update"]
    (section,) = [s for s in summary_sections(results) if s.benchmark == "weight_update"]
    assert len(section.rows) == len(OPTIMIZERS) * len(LAYOUTS)
    (plot,) = report_plots(results)["weight_update"]
    check_figure(plot, ms)
    assert [t["name"] for t in traces(plot, "measurement")] == list(LAYOUTS)
