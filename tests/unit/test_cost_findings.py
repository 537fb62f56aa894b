"""The price of each finding: advice with a gain of the training step (or of a part of it,
times that part's share), the gap to a target (scaling, the prediction, an input-bound
loader), a slow node drained or kept; what cannot be priced says why.  Then the cost in the
summary, report.html and the exports."""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from html.parser import HTMLParser
from pathlib import Path

import plotly.graph_objects as go
import pytest

from clusterbench.analyses.cost import section as cost_section
from clusterbench.analyses.cost.export import cost_measurements, with_cost
from clusterbench.analyses.cost.findings import PricedFinding
from clusterbench.analyses.cost.prices import CloudOffer, CostRequest, OnPremOffer
from clusterbench.analyses.cost.table import CostTable, cost_table
from clusterbench.analyses.prediction.predict import predict
from clusterbench.analyses.run import report_plots, summary_sections
from clusterbench.benchmarks.attribution import AttributionMetrics as A
from clusterbench.benchmarks.training.findings import scaling_findings
from clusterbench.benchmarks.training.settings import TrainingMetrics as T
from clusterbench.benchmarks.training.thresholds import TrainingThresholds
from clusterbench.benchmarks.weight_update import WeightUpdateMetrics as W
from clusterbench.judging.advice import advice_evidence
from clusterbench.report import export_prometheus
from clusterbench.report.export import csv_text
from clusterbench.report.html import render_html
from clusterbench.report.html_tables import grid_table
from clusterbench.schema import Finding, Measurement, Results
from clusterbench.thresholds import run_thresholds
from tests.pages import analysis
from tests.prediction_runs import make, run_of
from tests.unit.test_cost import training_run

PRICE = 2.0
CLOUD = CostRequest(offers=[CloudOffer(gpu_hour=PRICE)], gpus=8)
SPEND = 8 * 730 * PRICE  # the 8-GPU cluster's month at $2 per GPU-hour


def _advice(
    id_: str, *, gain: float, gain_of: str, better: str = "lower", **evidence: object
) -> Finding:
    advice = advice_evidence(
        change=f"change for {id_}",
        gain=gain,
        gain_of=gain_of,
        basis="measured",
        better=better,  # type: ignore[arg-type]
        evidence="7 vs 7 repeats, p 0.001",
    )
    return Finding(
        id=id_, severity="info", scope="run", message="...", evidence={**evidence, **advice}
    )


def _with(
    results: Results, *, findings: list[Finding], measurements: Sequence[Measurement] = ()
) -> Results:
    return results.model_copy(
        update={
            "findings": [*results.findings, *findings],
            "measurements": [*results.measurements, *measurements],
        }
    )


def _priced(table: CostTable, finding_id: str) -> list[PricedFinding]:
    return [p for p in table.priced if p.finding_id.startswith(finding_id)]


def test_advice_of_the_training_step_is_priced_by_its_gain() -> None:
    partition = _advice("training.partition", gain=0.2, gain_of="time to batch 64 (1.3b ddp)")
    idle = _advice("attribution.accum_idle", gain=0.05, gain_of="of the iteration in idle")
    table = cost_table(
        _with(training_run({1: 1000.0, 8: 950.0}), findings=[partition, idle]), CLOUD
    )
    [p] = _priced(table, "training.partition")
    assert p.fraction == pytest.approx(0.2) and p.savings["cloud"] == pytest.approx(0.2 * SPEND)
    [a] = _priced(table, "attribution.accum_idle")
    assert a.savings["cloud"] == pytest.approx(0.05 * SPEND)
    assert table.priced == sorted(table.priced, key=lambda x: -x.fraction)  # largest first


def test_nccl_tuning_is_priced_by_the_exposed_communication_share() -> None:
    tune = _advice("collectives.tune.recommend", gain=0.3, gain_of="all_reduce time at 4 MiB")
    base = training_run({1: 1000.0, 8: 950.0})
    shares = [make(A.communication, v, rank=r, rank_step="mean") for r, v in ((0, 20.0), (1, 30.0))]
    shares.append(make(A.communication, 90.0, rank=0, rank_step="2"))  # one step: not the mean
    table = cost_table(_with(base, findings=[tune], measurements=shares), CLOUD)
    [p] = _priced(table, "collectives.tune")
    assert p.fraction == pytest.approx(0.3 * 0.25)  # 30% less all_reduce x 25% of the step
    assert "25% of the step in exposed communication" in p.note
    # without attribution and without a prediction: not priced, and why
    bare = cost_table(_with(base, findings=[tune]), CLOUD)
    assert not bare.priced and "no communication share" in bare.unpriced[0].reason


def test_the_optimizer_step_is_priced_by_its_share_of_the_training_step() -> None:
    layouts = {
        "fp32": {"fused_ms": 10.0, "foreach_ms": 15.0},
        "bf16": {"fused_ms": 8.0, "foreach_ms": 9.0},
    }
    fused = _advice(
        "weight_update.fused_vs_foreach", gain=1 / 3, gain_of="AdamW update time", layouts=layouts
    )
    steps = [
        make(T.step_time_ms, 100.0, model="1.3b", world_size=1, series="scaling"),
        make(W.step_time_ms, 15.0, model="1.3b", optimizer="adamw"),
    ]
    table = cost_table(
        _with(training_run({1: 1000.0}), findings=[fused], measurements=steps), CLOUD
    )
    [p] = _priced(table, "weight_update")
    assert p.fraction == pytest.approx(5 / 100)  # 15 - 10 ms saved of a 100 ms step
    other_model = [make(W.step_time_ms, 15.0, model="7b", optimizer="adamw")]
    table = cost_table(
        _with(training_run({1: 1000.0}), findings=[fused], measurements=other_model), CLOUD
    )
    assert not table.priced and "no training step of the 7b" in table.unpriced[0].reason


def test_an_input_bound_loader_is_priced_by_the_busy_share() -> None:
    def bound(busy: dict[str, float]) -> Finding:
        return Finding(
            id="dataloader.input_bound",
            severity="warn",
            scope="host:node0/cuda:0",
            message="...",
            evidence={"dataset": "imagenet", "gpu_busy_pct": busy, "threshold": 0.9},
        )

    base = training_run({1: 1000.0})
    with_best = cost_table(_with(base, findings=[bound({"default": 60.0, "best": 80.0})]), CLOUD)
    [p] = with_best.priced
    assert p.basis == "measured" and p.fraction == pytest.approx(1 - 0.6 / 0.8)
    to_threshold = cost_table(_with(base, findings=[bound({"default": 60.0})]), CLOUD)
    [q] = to_threshold.priced
    assert q.basis == "target" and q.fraction == pytest.approx(1 - 0.6 / 0.9)


def test_gains_that_are_no_share_of_the_step_are_not_priced() -> None:
    loader = _advice(
        "dataloader.slow_default_loader", gain=0.4, better="higher", gain_of="DataLoader samples/s"
    )
    other = _advice("memory.copy", gain=0.1, gain_of="copy time")
    table = cost_table(_with(training_run({1: 1000.0}), findings=[loader, other]), CLOUD)
    assert not table.priced
    reasons = {u.finding_id: u.reason for u in table.unpriced}
    assert "did not wait for input" in reasons["dataloader.slow_default_loader"]
    assert "not a share of the training step" in reasons["memory.copy"]


def _predicted_run(num_nodes: int = 8) -> Results:
    """run_of's training, collectives and attribution, with the tokens/s its steps give."""
    r = run_of(num_nodes=num_nodes, gpus_per_node=8)
    rates = [
        make(T.tokens_per_s_per_gpu, 8 * 2048 / (m.value / 1e3), **m.params)
        for m in T.step_time_ms.select(r)
    ]
    return r.model_copy(update={"measurements": [*r.measurements, *rates]})


def test_the_prediction_at_the_gpu_count_priced() -> None:
    r = _predicted_run()
    table = cost_table(r, CostRequest(offers=[CloudOffer(gpu_hour=PRICE)], gpus=256))
    row = next(x for x in predict(r, gpu_counts=[256]).rows if x.strategy == "ddp")
    e = row.step.efficiency
    assert table.at.basis == "predicted" and table.at.efficiency == pytest.approx(e)
    rate_1 = 8 * 2048 / (T.step_time_ms.select(r)[0].value / 1e3)
    assert table.at.per_device == pytest.approx(rate_1 * e)
    assert e < 0.9  # this run's model falls below the target at 256 GPUs: priced
    [p] = _priced(table, "prediction.scaling")
    assert p.basis == "predicted" and p.fraction == pytest.approx(1 - e / 0.9)
    assert p.savings["cloud"] == pytest.approx(256 * 730 * PRICE * (1 - e / 0.9))
    assert f"{row.needed_gbps:,.0f} Gb/s per node" in p.statement


def _node_pairs(hosts: list[str], slow: str) -> list[Measurement]:
    """Every pair's all_reduce busbw: 10 +- 0.2 GB/s, the pairs of ``slow`` 0.1 GB/s."""
    out = []
    pairs = [(a, b) for i, a in enumerate(hosts) for b in hosts[i + 1 :]]
    for k, (a, b) in enumerate(pairs):
        value = 0.1 if slow in (a, b) else 10.0 + 0.2 * ((k % 3) - 1)
        out.append(
            Measurement(
                benchmark="collectives",
                metric="busbw",
                value=value,
                unit="GB/s",
                params={
                    "op": "all_reduce",
                    "size_bytes": 1 << 20,
                    "group": f"{a}-{b}",
                    "group_kind": "node_pairs",
                    "group_size": 2,
                    "hosts": f"{a},{b}",
                    "mode": "back_to_back",
                    "dtype": "fp32",
                },
                rank=0,
                host=a,
                device="cuda:0",
            )
        )
    return out


def test_a_slow_node_drained_and_kept() -> None:
    r = _predicted_run()
    hosts = [h.hostname for h in r.hosts]
    pairs = _node_pairs(hosts, slow="node5")
    r = r.model_copy(update={"measurements": [*r.measurements, *pairs]})
    table = cost_table(r, CostRequest(offers=[CloudOffer(gpu_hour=PRICE)], gpus=256))
    drained = [p for p in table.priced if p.basis == "capacity"]
    kept = [p for p in table.priced if p.finding_id == "drain.node" and p.basis == "predicted"]
    assert [p.scope for p in drained] == ["node node5"] and [p.scope for p in kept] == [
        "node node5"
    ]
    assert drained[0].fraction == pytest.approx(1 / 32)  # one of the 256 / 8 nodes idle
    healthy = [m.value for m in pairs if "node5" not in m.params["hosts"]]  # type: ignore[operator]
    ratio = 0.1 / statistics.median(healthy)
    p = predict(r, gpu_counts=[256])
    slow = predict(r, gpu_counts=[256], nic_gbps=p.inter_node_gbps * ratio)
    e_full, e_slow = p.rows[0].step.efficiency, slow.rows[0].step.efficiency
    assert kept[0].fraction == pytest.approx(1 - e_slow / e_full)
    assert kept[0].fraction > drained[0].fraction  # at 1% bandwidth keeping it costs more


# --- the cost in the summary, report.html and exports -------------------------------------------


def _priced_run(tmp_path: Path) -> tuple[Path, Results]:
    r = _predicted_run(num_nodes=2)
    request = CostRequest(
        offers=[
            CloudOffer(gpu_hour=PRICE),
            OnPremOffer(
                capex_per_node=250e3,
                years=4,
                power_kw_per_node=6.5,
                power_price=0.12,
                pue=1.4,
                ops_per_year=20e3,
            ),
        ],
        gpus=256,
        utilisation=0.8,
        train_tokens=1e12,
    )
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "results.json").write_text(r.model_dump_json(), encoding="utf-8")
    (folder / cost_section.COST_FILE).write_text(
        cost_section.cost_json(cost_table(r, request)), encoding="utf-8"
    )
    return folder, r


def test_the_kept_prices_price_the_summary_report_and_exports(tmp_path: Path) -> None:
    folder, r = _priced_run(tmp_path)
    request = cost_section.read_request(folder)
    assert request is not None and [o.name for o in request.offers] == ["cloud", "on-prem"]
    table = cost_table(r, request)
    [section] = [s for s in summary_sections(r, run_dir=folder) if s.benchmark == "cost"]
    titles = [g.title for g in section.grids]
    assert any(t.startswith("cost: cloud against on-prem") for t in titles)
    assert any(t.startswith("cost: the price of each finding") for t in titles)
    plots = report_plots(r, run_dir=folder)["cost"]
    for plot in plots:
        go.Figure(plot.figure)  # valid by plotly's schema
        for key in ("xaxis", "yaxis"):
            axis = plot.figure["layout"][key]
            assert axis.get("type") == "category" or axis["title"]["text"].endswith(")")
    page = render_html(analysis(r, plots={"cost": plots}, run_dir=folder))
    assert 'id="b-cost"' in page and "break-even" in page
    # exports: the cost figures as measurements of 'cost', the prices as findings
    priced = cost_section.priced_results(r, folder)
    csv = csv_text(priced)
    assert ",cost,usd_per_million_tokens," in csv and ",cost,finding_usd_per_month," in csv
    prom = export_prometheus.text(priced)
    assert "clusterbench_cost_usd_per_million_tokens" in prom
    spend = [m for m in cost_measurements(table, r) if m.metric == "usd_per_month"]
    assert {m.params["offer"]: m.value for m in spend} == {
        o.name: o.monthly_usd for o in table.offers
    }
    prices = [f for f in priced.findings if f.id == "cost.price"]
    assert len(prices) == len(table.priced) >= 1 and "per month at $2.00 per GPU-hour" in (
        prices[0].message
    )
    assert with_cost(r, table).measurements[: len(r.measurements)] == r.measurements


def test_a_broken_cost_json_costs_the_summary_nothing(tmp_path: Path) -> None:
    folder, r = _priced_run(tmp_path)
    (folder / cost_section.COST_FILE).write_text("{not json", encoding="utf-8")
    [section] = [s for s in summary_sections(r, run_dir=folder) if s.benchmark == "cost"]
    assert (
        section.grids[0].title == "cost: not computed"
        and "cost.json" in section.grids[0].rows[0][0]
    )
    with pytest.raises(ValueError, match=r"not a clusterbench cost\.json"):
        cost_section.priced_results(r, folder)


# --- one threshold, one efficiency per row, the page's table (issue 41, item 4) ----------------


def _measured_findings(results: Results) -> Results:
    """``results`` with the training benchmark's own scaling verdicts at the run's thresholds."""
    t = run_thresholds(results).of(TrainingThresholds)
    found = scaling_findings(
        results, warn=t.scaling_min_efficiency_warn, fail=t.scaling_min_efficiency_fail
    )
    return _with(results, findings=found)


def test_the_finding_and_its_price_name_the_same_target() -> None:
    """72% at 2 GPUs fails (under 80%); the finding and the cost name one target, the
    threshold's 90%, and the price is the gap to that number."""
    r = _measured_findings(training_run({1: 1000.0, 2: 720.0}))
    [finding] = [f for f in r.findings if f.id == "training.scaling_efficiency"]
    table = cost_table(r, CostRequest(offers=[CloudOffer(gpu_hour=PRICE)], gpus=2))
    [p] = _priced(table, "training.scaling_efficiency")
    named = re.search(r"below (\d+)%, the target", finding.message)
    priced = re.search(r"reaching the (\d+)% target", p.statement)
    assert named is not None and priced is not None, (finding.message, p.statement)
    assert named[1] == priced[1] == "90"
    assert "threshold asks" not in p.statement and p.statement.count("%") == 2
    assert p.fraction == pytest.approx(1 - 0.72 / 0.90)
    assert "measured at 2 GPUs" in p.statement


def test_a_measured_efficiency_prices_only_the_row_it_was_measured_at() -> None:
    """At 256 GPUs the row priced is the prediction's: the 2-GPU measurement's finding is not
    priced on the 256-GPU spend, and says why with the efficiency the row shows."""
    r = _predicted_run()
    slow = Finding(
        id="training.scaling_efficiency",
        severity="fail",
        scope="run",
        message="...",
        evidence={"efficiency_pct": 72.0, "world_size": 2, "scaling_mode": "weak"},
    )
    table = cost_table(
        _with(r, findings=[slow]), CostRequest(offers=[CloudOffer(gpu_hour=PRICE)], gpus=256)
    )
    assert table.at.basis == "predicted" and table.at.measured_at is None
    assert _priced(table, "training.scaling_efficiency") == []
    [why] = [u for u in table.unpriced if u.finding_id == "training.scaling_efficiency"]
    assert "measured at 2 GPUs" in why.reason and f"{table.at.efficiency:.1%}" in why.reason
    # every scaling price that remains is of the efficiency the priced row shows
    [row] = [x for x in cost_section.throughput_grid(table).rows if x[0] == "256"]
    for p in _priced(table, "prediction.scaling"):
        assert f"{table.at.efficiency:.0%} weak scaling predicted at 256" in p.statement
        assert p.fraction == pytest.approx(1 - float(row[2]) / 100 / 0.9, abs=1e-3)  # row: 3 digits


def test_an_assumed_row_is_priced_by_the_measurement_it_rests_on() -> None:
    r = _measured_findings(training_run({1: 1000.0, 2: 950.0, 8: 720.0}))
    table = cost_table(r, CostRequest(offers=[CloudOffer(gpu_hour=PRICE)], gpus=64))
    assert table.at.basis == "assumed" and table.at.measured_at == 8
    [p] = _priced(table, "training.scaling_efficiency")
    assert "72% weak scaling measured at 8 GPUs" in p.statement
    assert p.fraction == pytest.approx(1 - table.at.efficiency / 0.9)


class _Cells(HTMLParser):
    """Each table's header and rows of (data-v or None, text)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[list[str], list[list[tuple[str | None, str]]]]] = []
        self._cell: tuple[str | None, str] | None = None
        self._th: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append(([], []))
        elif tag == "tr":
            self.tables[-1][1].append([])
        elif tag == "th":
            self._th = ""
        elif tag == "td":
            self._cell = (dict(attrs).get("data-v"), "")

    def handle_data(self, data: str) -> None:
        if self._th is not None:
            self._th += data
        elif self._cell is not None:
            self._cell = (self._cell[0], self._cell[1] + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "th" and self._th is not None:
            self.tables[-1][0].append(self._th)
            self._th = None
        elif tag == "td" and self._cell is not None:
            self.tables[-1][1][-1].append(self._cell)
            self._cell = None


def test_the_page_cost_tables_keep_each_column_apart() -> None:
    """Every row as many cells as the header; sentences (a note that starts with a digit
    included) are text cells, which wrap, not one-line figures; money and shares sort."""
    r = _measured_findings(training_run({1: 1000.0, 2: 720.0}))
    r = _with(r, findings=[_advice("training.partition", gain=0.2, gain_of="step time")])
    table = cost_table(r, CostRequest(offers=[CloudOffer(gpu_hour=PRICE)], gpus=2))
    grids = cost_section.table_grids(table)
    parser = _Cells()
    parser.feed("".join(grid_table(g) for g in grids))
    assert len(parser.tables) == len(grids)
    for grid, (header, rows) in zip(grids, parser.tables, strict=True):
        assert header == list(grid.header)
        body = [row for row in rows if row]
        assert len(body) == len(grid.rows)
        for row in body:
            assert len(row) == len(header), (grid.title, row)
            for name, (value, text) in zip(header, row, strict=True):
                if name in grid.text_columns:
                    assert value is None, (name, text)
    [(header, findings_rows)] = [t for t in parser.tables if "how" in t[0]]
    notes = [row[header.index("how")] for row in findings_rows if row]
    assert any(text.startswith("1 - ") for _, text in notes)  # a note led by a digit: still text
    shares = [row[header.index("share %")] for row in findings_rows if row]
    assert all(value is not None for value, _ in shares)


@pytest.mark.parametrize(("gpus", "basis"), [(2, "measured"), (64, "assumed"), (256, "predicted")])
def test_one_row_is_priced_and_says_where_its_efficiency_comes_from(gpus: int, basis: str) -> None:
    r = _predicted_run() if basis == "predicted" else training_run({1: 1000.0, 2: 720.0})
    table = cost_table(r, CostRequest(offers=[CloudOffer(gpu_hour=PRICE)], gpus=gpus))
    assert table.at.basis == basis
    [row] = [x for x in cost_section.throughput_grid(table).rows if "priced" in x[-1]]
    assert row[0].rstrip("*") == str(gpus)
    assert float(row[2]) == pytest.approx(100 * table.at.efficiency, abs=0.05)
    said = {"measured": "measured; priced", "assumed": "measured at 2 GPUs holds at 64"}
    assert said.get(basis, "predicted by the scaling model") in row[-1]
