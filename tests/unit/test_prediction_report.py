"""The prediction in the summary and report.html: its section after the benchmarks' (only when
training and collectives both ran), its tables, and its curves: the measurements drawn as
they are, the predicted lines and bands as the prediction computed them, valid by plotly's
schema, on the page's embedded data."""

from __future__ import annotations

import json
from typing import Any

import plotly.graph_objects as go
import pytest

from clusterbench import catalog
from clusterbench.analyses.prediction import figures as prediction_figures
from clusterbench.analyses.prediction import section as prediction_section
from clusterbench.analyses.prediction.predict import predict
from clusterbench.analyses.run import report_plots, summary_sections
from clusterbench.benchmarks.training.settings import TrainingMetrics as T
from clusterbench.report.html import render_html
from clusterbench.report.markdown import render_markdown
from clusterbench.views.plots import Plot
from tests.html_page import parse_page
from tests.pages import analysed, analysis
from tests.prediction_runs import run_of

catalog.register_builtin()


def traces(plot: Plot, meta: str | None = None) -> list[dict[str, Any]]:
    return [t for t in plot.figure["data"] if meta is None or t["meta"] == meta]


def test_the_section_comes_after_the_benchmarks_with_its_tables() -> None:
    r = run_of(num_nodes=2, strategy="fsdp2")
    sections = summary_sections(r)
    assert [s.benchmark for s in sections] == ["training", "collectives", "attribution",
                                               "prediction"]  # fmt: skip
    grids = {g.title.split(",")[0]: g for g in sections[-1].grids}
    p = predict(r)
    table = grids["prediction: weak scaling of 1.3b fsdp2 at 8 GPUs per node (the run's 8 GPUs "
                  "per node)"]  # fmt: skip
    assert [row[:2] for row in table.rows] == [
        (str(n), s) for n in (64, 256, 1024) for s in ("fsdp", "ddp")
    ]
    for row, predicted in zip(table.rows, p.rows, strict=True):
        assert float(row[2]) == pytest.approx(1e3 * predicted.step.step_s, rel=1e-3)
        assert float(row[5]) == pytest.approx(100 * predicted.step.efficiency, abs=0.05)
        needed = predicted.needed_gbps
        want = f"{needed:,.0f}" if needed is not None else "out of reach"
        assert row[7] == want + (" (beyond NICs)" if predicted.beyond_nics else "")
    validation = grids["prediction: validation"]
    assert [row[0] for row in validation.rows] == ["4", "8", "16"]
    links = next(g for t, g in grids.items() if t.startswith("prediction: links"))
    assert sum(row[-1] == "yes" for row in links.rows) == 2 and len(links.rows) == 10
    assert "## prediction" in render_markdown(analysis(r, sections))


def test_assumed_rows_are_marked_and_the_assumptions_listed() -> None:
    r = run_of(num_nodes=1, gpus_per_node=1, collectives=False, overlap_pairs=None)
    section = prediction_section.section(r, analysed(r))
    assert section is not None
    table, validation, _, _, assumed = section.grids
    assert all(row[0].endswith("*") for row in table.rows)
    assert [row[0] for row in assumed.rows] == [
        "intra-node link", "inter-node link", "overlap", "GPUs per node",
    ]  # fmt: skip
    assert validation.rows == [("needs 2 measured world sizes; one GPU measured: the 1→2 check "
                                "waits for two GPUs",)]  # fmt: skip


def test_no_section_without_collectives_and_a_reason_without_a_prediction() -> None:
    r = run_of(num_nodes=1, collectives=False)
    r.run.benchmarks = ["training"]
    assert prediction_section.section(r, analysed(r)) is None
    assert "prediction" not in report_plots(r)
    tp = prediction_section.section(
        run_of(num_nodes=1, strategy="tp"), analysed(run_of(num_nodes=1, strategy="tp"))
    )
    assert tp is not None and tp.grids[0].title == "prediction: not made"
    assert "tensor or pipeline" in tp.grids[0].rows[0][0]
    assert (
        prediction_figures.figures(
            run_of(num_nodes=1, strategy="tp"), analysed(run_of(num_nodes=1, strategy="tp"))
        )
        == []
    )


def test_the_curves_draw_the_measurements_and_the_prediction() -> None:
    r = run_of(num_nodes=2)
    p = predict(r)
    efficiency, step = report_plots(r)["prediction"]
    for plot in (efficiency, step):
        go.Figure(plot.figure)  # valid by plotly's schema
        assert json.loads(json.dumps(plot.figure, allow_nan=False)) == plot.figure
        layout = plot.figure["layout"]
        assert layout["xaxis"]["type"] == "log"
        for key in ("xaxis", "yaxis"):
            assert layout[key]["title"]["text"].endswith(")")
        assert all(" %" in t["hovertemplate"] or " ms" in t["hovertemplate"]
                   for t in traces(plot))  # fmt: skip
        assert {t["meta"] for t in traces(plot)} <= {"measurement", "prediction", "reference"}
    # measured: the training series' own values, at their world sizes
    [measured] = traces(efficiency, "measurement")
    recorded = sorted((m.params["world_size"], m.value) for m in T.scaling_efficiency.select(r))
    assert list(zip(measured["x"], measured["y"], strict=True)) == recorded
    [steps] = traces(step, "measurement")
    assert steps["y"] == [m.value for m in T.step_time_ms.select(r)]
    # each strategy: band low, band high filled to it, then the line, as the prediction says
    lines = traces(efficiency, "prediction")
    assert [t["name"] for t in lines] == [
        "ddp 95% band (low)", "ddp 95% band", "ddp predicted",
        "fsdp 95% band (low)", "fsdp 95% band", "fsdp predicted",
    ]  # fmt: skip
    for strategy, (low, high, line) in zip(("ddp", "fsdp"), (lines[:3], lines[3:]), strict=True):
        curve = [c for c in p.curve if c.strategy == strategy]
        assert line["x"] == [c.world_size for c in curve] == [1, 2, 4, 8, 16, 32, 64, 128, 256,
                                                              512, 1024]  # fmt: skip
        assert line["y"] == [100 * c.efficiency for c in curve]
        assert high["fill"] == "tonexty" and "fill" not in low
        assert all(lo <= y <= hi for lo, y, hi in zip(low["y"], line["y"], high["y"],
                                                       strict=True))  # fmt: skip
    [target] = traces(efficiency, "reference")
    assert set(target["y"]) == {90.0}
    # the validation: the predicted step of each checked size, its error in the hover
    [check] = [t for t in traces(step, "prediction") if t["name"].startswith("validation")]
    assert p.validation is not None
    assert check["x"] == [4, 8, 16]
    assert check["y"] == [1e3 * pt.predicted_s for pt in p.validation.points]
    # the tables beside the curves are the section's
    section = prediction_section.section(r, analysed(r))
    assert section is not None
    assert efficiency.table == section.grids[0] and step.table == section.grids[1]


def test_the_page_embeds_the_curves_and_shows_the_section_once() -> None:
    r = run_of(num_nodes=2)
    plots = report_plots(r)
    page = parse_page(render_html(analysis(r, plots=plots)))
    drawn = [f for f in page.blob["figures"] if f["benchmark"] == "prediction"]
    assert [f["title"] for f in drawn] == [p.title for p in plots["prediction"]]
    assert drawn[0]["data"] == json.loads(json.dumps(plots["prediction"][0].figure["data"]))
    assert "b-prediction" in page.ids() or "prediction" in page.ids()
    titles = [t.title for t in page.tables if (t.title or "").startswith("prediction:")]
    section = prediction_section.section(r, analysed(r))
    assert section is not None  # measured links: no assumptions table
    expected = [g.title for g in section.grids]
    assert len(expected) == 4
    assert sorted(titles) == sorted(expected)  # beside the plots or below, never twice


def test_the_findings_section_and_figures_share_the_runs_one_prediction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from clusterbench.analyses.prediction import predict as module
    from clusterbench.analyses.run import RunAnalysis, analyze

    calls: list[int] = []
    real = module.predict
    monkeypatch.setattr(module, "predict", lambda *a, **k: calls.append(1) or real(*a, **k))
    run = RunAnalysis(run_of(num_nodes=2))
    found = {f.id for f in analyze(run)}
    names = [s.benchmark for s in run.sections]
    assert {"prediction.scaling", "prediction.validation"} <= found
    assert "prediction" in names and "prediction" in run.plots
    assert len(calls) == 1  # made once, read by the findings, the section and the figures
