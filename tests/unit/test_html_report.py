"""The HTML report as a file: header verdict, hardware, escaping, sortable tables, plots beside
their tables, figures that fail, the page of a 64-node run, report.html at the end of a run,
and ``clusterbench report`` (paths, exit codes, the comparison page)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from clusterbench import catalog, load_results, registry
from clusterbench.analyses.run import report_plots, summary_sections
from clusterbench.cli import app
from clusterbench.config import build_run_config
from clusterbench.pipeline.finish import REPORT_FILE, finish, write_partial, write_results
from clusterbench.pipeline.spec import RunSpec, now_utc
from clusterbench.report.html import render_html
from clusterbench.report.html_assets import plotly_js
from clusterbench.report.html_tables import number_in
from clusterbench.runtime.records import End, Hello, MeasurementRecord, Start
from clusterbench.schema import ErrorRecord, Finding, Measurement, Results
from clusterbench.views.cells import Grid, Matrix, Section, matrix_title
from clusterbench.views.plots import Plot, PlotContext
from tests.html_page import external_references, parse_page, plotly_in
from tests.pages import analysis
from tests.report_figures import heatmap, own_figures
from tests.synthetic_cluster import cluster_results
from tests.unit.test_compare import meas, results, samples

ROOT = Path(__file__).resolve().parents[2]

catalog.register_builtin()
runner = CliRunner()


def page_of(r: Results, plots: dict[str, list[Plot]] | None = None, **kw: Any) -> str:
    show_all = kw.pop("show_all", False)
    return render_html(analysis(r, plots=plots or {}, **kw), show_all=show_all)


@pytest.fixture(scope="module")
def small() -> Results:
    r = cluster_results(num_hosts=4, gpus_per_host=2)
    r.errors = [ErrorRecord(benchmark="network", rank=3, host="gpu-node-001", message="timed out")]
    r.run.unfinished = ["network"]
    r.run.skipped = {"dataloader": "no cpu form"}
    return r


def test_the_header_gives_the_verdict_most_severe_first_each_with_its_fix(small: Results) -> None:
    page = parse_page(page_of(small))
    verdict = [t for t in page.text if t.startswith("run completed")]
    assert verdict == [
        "run completed · findings: 1 fail, 2 warn, 1 info · 1 error · did not finish: network"
    ]
    (verdict_div,) = [a for tag, a in page.tags if "verdict" in a.get("class", "").split()]
    assert verdict_div["class"] == "verdict fail"
    findings, notes = page.tables[0], page.tables[1]  # the notes (info) in a part of their own
    assert findings.header == notes.header == ["severity", "scope", "finding", "fix"]
    assert [row[0][0] for row in findings.rows] == ["fail", "warn", "warn"]
    assert findings.row_classes == ["sev-fail", "sev-warn", "sev-warn"]
    assert [row[0][0] for row in notes.rows] == ["info"] and notes.row_classes == ["sev-info"]
    by_message = {row[2][0]: row[3][0] for row in [*findings.rows, *notes.rows]}
    for f in small.findings:
        assert by_message[f.message] == f.fix
    text = " ".join(page.text)
    assert "network rank 3 host gpu-node-001: timed out" in text
    assert "did not finish: network" in text and "skipped dataloader: no cpu form" in text


def test_a_clean_run_says_so() -> None:
    r = results(meas(700.0))
    r.findings = []
    page = parse_page(page_of(r))
    assert "run completed · no findings" in page.text
    assert ("div", {"class": "verdict ok"}) in page.tags


def test_the_hardware_groups_alike_hosts_and_marks_what_differs(small: Results) -> None:
    page = parse_page(page_of(small))
    text = page.text
    assert "gpu-node-000, gpu-node-001, gpu-node-002" in text and "gpu-node-003" in text
    assert "2 × NVIDIA H200 (140 GiB)" in text
    assert "Intel Xeon Platinum 8480+, 2 sockets, 112 cores, 224 threads, 2 NUMA nodes" in text
    assert "2 × infiniband 400 Gb/s (ACTIVE), 1 × ethernet 100 Gb/s (up)" in text
    versions = [t for t in text if t.startswith("driver ")]
    assert versions[0].startswith("driver 570.86.15 · driver CUDA 12.8 · cuda 12.8 · torch 2.13.0")
    assert "nccl 2.27.3" in versions[0] and versions[1].startswith("driver 565.57.01")
    differs = [a for tag, a in page.tags if tag == "dd" and a.get("class") == "differs"]
    assert len(differs) == 1  # only the versions of the odd host


def test_meta_and_the_wall_time_of_each_benchmark(small: Results) -> None:
    text = parse_page(page_of(small)).text
    assert "synthetic-64x8" in text and "standard" in text and "725 s" in text
    assert "8 ranks on 4 nodes, nccl" in text
    assert "srun -N 4 clusterbench run --suite standard" in text
    page = parse_page(page_of(small))
    times = page.table_titled("Where the time went")
    assert times.title == "Where the time went: 724.0 s in 9 benchmarks"
    assert times.column("benchmark")[0][0] == "network"  # slowest first
    assert float(times.column("wall time, s")[0][1]["data-v"]) == 210.4
    no_times = small.model_copy(deep=True)
    no_times.run.benchmark_seconds = {}
    assert "Where the time went" not in page_of(no_times)


def test_every_text_is_escaped() -> None:
    evil = "</script><script>alert(1)</script><b>&amp;"
    r = results(meas(700.0, host=evil))
    r.findings = [Finding(id="x", severity="warn", scope=evil, message=evil, fix=evil)]
    r.run.command = evil
    plot = Plot(
        title=evil,
        figure={
            "data": [{"type": "bar", "x": [evil], "y": [1.0], "name": evil}],
            "layout": {"title": {"text": evil}},
        },
        table=Grid(title=evil, header=(evil, "GB/s"), rows=[(evil, "1.0")]),
        notes=[evil],
    )
    html = page_of(r, {"gemm": [plot]})
    assert "<script>alert" not in html and "<b>&amp;" not in html
    page = parse_page(html)
    assert [t for t, _ in page.tags].count("b") == 0
    assert len(page.scripts) == 6  # the data, plotly's config and packed bundle, draw, sort, unpack
    assert evil in page.text  # shown as text, whole
    (figure,) = page.blob["figures"]
    assert figure["title"] == evil and figure["data"][0]["x"] == [evil]
    assert figure["layout"]["title"]["text"] == evil


def test_tables_sort_by_the_numbers_they_show(small: Results) -> None:
    sections = summary_sections(small)
    page = parse_page(render_html(analysis(small, sections, {})))
    assert page.tables and all("sortable" in t.classes for t in page.tables)
    gemm = next(s for s in sections if s.benchmark == "gemm")
    rows_table = page.table_titled("gemm · 8 devices")
    for row, cells in zip(gemm.rows, rows_table.rows, strict=True):
        shown = dict(zip(rows_table.header, cells, strict=True))
        assert float(shown["median"][1]["data-v"]) == row.median
        assert float(shown["min"][1]["data-v"]) == row.low.value
        assert shown["unit"][0] == row.unit  # every number keeps its unit
    grid = page.table_titled("busbw GB/s by size, back-to-back, group world")
    sizes = [float(c[1]["data-v"]) for c in grid.column("size")]
    assert sizes == sorted(sizes) and sizes[0] == number_in(grid.column("size")[0][0])
    network = next(s for s in sections if s.benchmark == "network")
    matrix = network.matrices[0]
    tcp = page.table_titled(matrix_title(matrix))
    assert tcp.header == [matrix.corner, *matrix.devices]
    for src, cells in zip(matrix.devices, tcp.rows, strict=True):
        for dst, (_, attrs) in zip(matrix.devices, cells[1:], strict=True):
            value = matrix.cells.get((src, dst))
            assert (value is None and "data-v" not in attrs) or float(attrs["data-v"]) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2 MiB", 2 * 2**20),
        ("1,017", 1017.0),
        ("42%", 0.42),
        ("12.5 (cpu:1)", 12.5),
        ("2.41e-07", 2.41e-07),
        ("-", None),
        ("fp32 best shape", None),
        ("+5.0%", 0.05),
        ("-3.5%", -0.035),
        ("8 B", 8.0),
    ],
)
def test_number_in(text: str, value: float | None) -> None:
    found = number_in(text)
    assert found == value if value is None else math.isclose(found or 0.0, value)


def test_a_plot_sits_beside_its_table_and_the_section_follows() -> None:
    r = results(meas(700.0), meas(650.0, device="cuda:1"))
    own = Grid(title="plotted, TFLOP/s", header=("device", "TFLOP/s"), rows=[("cuda:0", "700")])
    bare = Plot(title="no table", figure={"data": [{"type": "bar", "x": ["a"], "y": [1]}]})
    with_table = dataclasses.replace(bare, title="with table", table=own)
    html = page_of(r, {"gemm": [with_table, bare]})
    pairs = html.split('<div class="pair">')[1:]
    assert len(pairs) == 2
    assert "cb-fig-0" in pairs[0] and "plotted, TFLOP/s" in pairs[0]
    assert "cb-fig-1" in pairs[1] and "gemm · 2 devices" in pairs[1]  # the section's, beside
    assert html.count("gemm · 2 devices") == 1


def test_a_plot_of_a_section_table_does_not_repeat_it() -> None:
    r = results(meas(700.0))
    matrix = Matrix(title="pairs", unit="GB/s", devices=["a", "b"], cells={("a", "b"): 3.0})
    section = Section("gemm", matrices=[matrix])
    plot = Plot(
        title="pairs",
        figure={"data": [{"type": "heatmap", "z": [[None, 3.0], [None, None]]}]},
        table=matrix,
    )
    html = render_html(analysis(r, [section], {"gemm": [plot]}))
    assert html.count("pairs, GB/s") == 1


def test_a_matrix_of_many_nodes_folds_below_its_heatmap_not_beside_it() -> None:
    r = results(meas(700.0))
    nodes = [f"node{i:02d}" for i in range(16)]
    matrix = Matrix(title="pairs", unit="GB/s", devices=nodes, cells={(nodes[0], nodes[1]): 3.0})
    small = Matrix(title="few", unit="GB/s", devices=nodes[:3], cells={(nodes[0], nodes[1]): 3.0})
    section = Section("gemm", matrices=[matrix, small])
    z = [[None] * 16 for _ in range(16)]
    plot = Plot(title="pairs", figure={"data": [{"type": "heatmap", "z": z}]}, table=matrix)
    bare = Plot(title="bare", figure={"data": [{"type": "bar", "x": ["a"], "y": [1]}]})
    html = render_html(analysis(r, [section], {"gemm": [plot, bare]}))
    first, second = html.split('<div class="pair">')[1:3]
    beside = first.split("</figure>", 1)[1].split("</div></div>", 1)[0]
    assert "pairs, GB/s" not in beside  # 16 x 16 values: not beside the plot...
    assert "<details><summary>the 16 x 16 values of pairs</summary>" in first  # ...but below
    assert "few, GB/s" in second and html.count("pairs, GB/s") == 1  # a small one stays beside


def test_figures_that_raise_cost_their_benchmark_a_note_not_the_report(
    small: Results, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(ms: list[Measurement], ctx: PlotContext) -> list[Plot]:
        raise RuntimeError("no size_bytes\nsecond line")

    def working(ms: list[Measurement], ctx: PlotContext) -> list[Plot]:
        return [
            Plot(
                title="memory bars", figure={"data": [{"type": "bar", "y": [m.value for m in ms]}]}
            )
        ]

    for name, fn in (("gemm", broken), ("memory", working)):
        monkeypatch.setitem(
            registry._REGISTRY, name, dataclasses.replace(registry.get(name), figures=fn)
        )
    plots = report_plots(small)
    (note,) = plots["gemm"]
    assert note.notes == [
        "the plots of gemm could not be drawn: RuntimeError: no size_bytes second line"
    ]
    page = parse_page(page_of(small, plots))
    assert (
        "the plots of gemm could not be drawn: RuntimeError: no size_bytes second line" in page.text
    )
    drawn = [f["benchmark"] for f in page.blob["figures"]]
    assert "gemm" not in drawn and drawn.count("memory") == 1 and "b-gemm" in page.ids()
    assert len(page.plot_ids) == len(drawn)


def test_report_plots_give_each_figure_its_measurements_and_the_base(
    small: Results, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[list[Measurement], PlotContext]] = []

    def record(ms: list[Measurement], ctx: PlotContext) -> list[Plot]:
        seen.append((ms, ctx))
        return []

    monkeypatch.setitem(
        registry._REGISTRY, "gemm", dataclasses.replace(registry.get("gemm"), figures=record)
    )
    report_plots(small)
    base = cluster_results(num_hosts=2, gpus_per_host=1, seed=3)
    report_plots(small, base=base)
    (ms, ctx), (_, with_base) = seen
    assert ms == [m for m in small.measurements if m.benchmark == "gemm"]
    assert ctx.multi_host and ctx.base is None
    assert with_base.base == [m for m in base.measurements if m.benchmark == "gemm"]


def test_plots_that_would_fetch_map_data_are_not_drawn() -> None:
    geo = Plot(title="where", figure={"data": [{"type": "scattergeo", "lat": [1], "lon": [2]}]})
    page = parse_page(page_of(results(meas(700.0)), {"gemm": [geo]}))
    assert page.blob["figures"] == [] and page.plot_ids == []
    assert "where: not drawn (scattergeo traces need map data from the network)" in page.text


def test_non_finite_numbers_become_null_in_the_data() -> None:
    plot = Plot(title="nan", figure={"data": [{"type": "scatter", "y": [1.0, math.nan, math.inf]}]})
    page = parse_page(page_of(results(meas(700.0)), {"gemm": [plot]}))
    assert page.blob["figures"][0]["data"][0]["y"] == [1.0, None, None]


def test_a_64_node_run_renders_whole() -> None:
    """64 hosts x 8 GPUs, some 33,000 measurements: every section, every figure and the full
    node-pair matrix are in the page, which references nothing outside itself."""
    big = cluster_results()
    assert len(big.measurements) > 30_000
    plots = report_plots(big)
    for name, extra in own_figures(big).items():
        plots[name] = [*plots.get(name, []), *extra]
    html = page_of(big, plots)
    page = parse_page(html)
    assert {f"b-{s.benchmark}" for s in summary_sections(big)} <= page.ids()
    drawn = [p for ps in plots.values() for p in ps if p.figure.get("data")]
    assert len(page.blob["figures"]) == len(drawn) == len(page.plot_ids)
    heat = next(
        f for f in page.blob["figures"] if f["title"] == "TCP throughput, sender x receiver"
    )
    expected = heatmap("x", [m for m in big.measurements if m.metric == "tcp_throughput"])
    assert heat["data"][0]["z"] == expected.figure["data"][0]["z"]
    assert len(heat["data"][0]["z"]) == 64 and heat["data"][0]["z"][0][0] is None
    network = next(s for s in summary_sections(big) if s.benchmark == "network")
    tcp = page.table_titled(matrix_title(network.matrices[0]))
    assert len(tcp.rows) == 64 and len(tcp.header) == 65
    slow = "gpu-node-016"
    assert (
        page.tables[0].rows[0][1][0] == f"host:{slow}"
        and page.tables[0].row_classes[0] == "sev-fail"
    )
    assert "63 hosts: gpu-node-000 … gpu-node-062" in page.text
    (plotly,) = plotly_in(html)  # plotly.js once, compressed: the partial bundle
    assert plotly == plotly_js() and external_references(html) == []


# --- report.html at the end of a run ------------------------------------------------------------


def test_a_run_still_going_has_its_results_json_and_the_page_comes_at_its_finish(
    tmp_path: Path,
) -> None:
    spec = RunSpec(
        run_id="r",
        run_dir=str(tmp_path),
        config=build_run_config(device_type="cpu", only=["gemm"]),
        device_type="cpu",
        started=now_utc(),
        command="clusterbench run",
        self_launched=False,
    )
    m = meas(0.5, unit="TFLOP/s", device="cpu:0", host="h1")
    records: list[Any] = [
        Hello(rank=0, seq=0, host="h1", local_rank=0, device="cpu:0"),
        Start(rank=0, seq=1, benchmark="gemm"),
        MeasurementRecord(rank=0, seq=2, data=m),
    ]
    write_partial(spec, records=records, world_size=1, flights={})
    running = load_results(tmp_path / "results.json")
    assert running.run.status == "running" and not running.findings
    assert not (tmp_path / REPORT_FILE).exists() and not (tmp_path / "summary.md").exists()
    records.append(End(rank=0, seq=3, benchmark="gemm"))
    done = finish(spec, records=records, failures=[], world_size=1).results
    assert done.run.status == "completed"
    page = parse_page((tmp_path / REPORT_FILE).read_text(encoding="utf-8"))
    assert "run completed · no findings" in page.text or any(
        t.startswith("run completed · findings") for t in page.text
    )
    assert not list(tmp_path.glob(".*.tmp"))


def test_write_results_leaves_the_page_out_unless_asked(tmp_path: Path) -> None:
    r = results(meas(700.0))
    write_results(analysis(r, run_dir=tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json", "summary.md"]
    write_results(analysis(r, run_dir=tmp_path), html=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [REPORT_FILE, "results.json", "summary.md"]


# --- clusterbench report ------------------------------------------------------------------------


def _invoke(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args))


def _run_folder(path: Path, r: Results) -> Path:
    path.mkdir(parents=True)
    (path / "results.json").write_text(r.model_dump_json(), encoding="utf-8")
    return path


def test_report_writes_the_page_into_the_run_folder(tmp_path: Path, small: Results) -> None:
    run = _run_folder(tmp_path / "run", small)
    result = _invoke("report", str(run))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(run / REPORT_FILE)
    assert "synthetic-64x8" in parse_page((run / REPORT_FILE).read_text()).text
    (run / REPORT_FILE).unlink()
    again = _invoke("report", str(run / "results.json"))
    assert again.exit_code == 0 and again.stdout.strip() == str(run / REPORT_FILE)
    elsewhere = tmp_path / "out.html"
    moved = _invoke("report", str(run), "-o", str(elsewhere))
    assert moved.exit_code == 0 and moved.stdout.strip() == str(elsewhere)
    assert elsewhere.read_text().startswith("<!DOCTYPE html>")
    assert not list(tmp_path.rglob(".*.tmp"))


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["nosuch"], "RUN: "),
        (["garbage"], "not UTF-8"),
        (["other"], "not a clusterbench results.json"),
        (["empty"], "no results.json in this folder"),
        (["run", "--match", "gpu"], "--match needs two runs"),
        (["run", "--all"], "--all needs two runs"),
        (["run", "-o", "missing/dir/x.html"], "cannot write "),
        (["run", "nosuch"], "NEW: "),
        (["nosuch", "run"], "BASE: "),
        (["run", "run", "--match", "rack"], "--match must be host or gpu"),
        (["run", "run", "--history", "h.sqlite", "--no-history"], "choose one"),
        (["run", "--set", "thresholds.regression_fail_rel=0.5"], "--set needs two runs"),
        (["run", "run", "--set", "gemm.dtypes=bf16"], "compare takes only thresholds"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path: Path, args: list[str], text: str) -> None:
    _run_folder(tmp_path / "run", results(meas(700.0)))
    (tmp_path / "garbage").write_bytes(b"\x00\xff not json")
    (tmp_path / "other").write_text('{"hello": 1}', encoding="utf-8")
    (tmp_path / "empty").mkdir()
    argv = [
        str(tmp_path / a) if a in ("run", "garbage", "other", "empty", "nosuch") or "/" in a else a
        for a in args
    ]
    result = _invoke("report", *argv)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clusterbench: error:") and text in lines[0]
    assert result.stdout == ""
    assert not list(tmp_path.rglob("*.html")) and not list(tmp_path.rglob(".*.tmp"))


def test_the_comparison_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base_run = results(meas(790.0, values=samples(790.0)), run_id="base")
    new_run = results(meas(600.0, values=samples(600.0)), run_id="new")
    base, new = _run_folder(tmp_path / "base", base_run), _run_folder(tmp_path / "new", new_run)
    bases: list[list[Measurement] | None] = []

    def against_base(ms: list[Measurement], ctx: PlotContext) -> list[Plot]:
        bases.append(ctx.base)
        ys = [m.value for m in ms] + [m.value for m in ctx.base or []]
        return [Plot(title="new and base", figure={"data": [{"type": "bar", "y": ys}]})]

    monkeypatch.setitem(
        registry._REGISTRY, "gemm", dataclasses.replace(registry.get("gemm"), figures=against_base)
    )
    db = _steady_history(tmp_path)
    result = _invoke("report", str(base), str(new), "--history", str(db))
    assert result.exit_code == 0, result.output  # the page is written whatever the verdicts
    assert result.stdout.strip() == str(new / "comparison.html")
    page = parse_page((new / "comparison.html").read_text())
    assert "comparison" in page.ids() and "b-gemm" in page.ids()
    assert ("div", {"class": "verdict fail"}) in page.tags
    changed = page.table_titled("Figures that changed")
    assert "sortable" in changed.classes
    (row,) = changed.rows
    shown = dict(zip(changed.header, row, strict=True))
    assert shown["verdict"][0] == "regression (fail)"
    assert shown["verdict"][1]["class"] == "verdict v-regression"
    assert float(shown["base"][1]["data-v"]) == 790.0 and float(shown["new"][1]["data-v"]) == 600.0
    assert math.isclose(float(shown["change"][1]["data-v"]), (600.0 - 790.0) / 790.0)
    regressions = [t for t in page.tables if t.header == ["severity", "scope", "finding", "fix"]]
    assert regressions[0].rows[0][0][0] == "fail" and regressions[0].rows[0][3][0]
    assert bases == [[m for m in base_run.measurements]]
    assert page.blob["figures"][0]["data"][0]["y"] == [600.0, 790.0]
    builtin = _invoke("report", "builtin", str(new), "--no-history", "-o", str(tmp_path / "b.html"))
    assert builtin.exit_code == 0, builtin.output
    assert bases[-1] is None  # a baseline has no measurements to draw


def _steady_history(tmp_path: Path) -> Path:
    """A history of three earlier runs within 1% of each other (the run-to-run noise)."""
    from clusterbench.history_db import open_history

    db = tmp_path / "history.sqlite"
    with open_history(db) as history:
        for i, v in enumerate((788.0, 792.0, 790.0)):
            earlier = results(meas(v), run_id=f"p{i}")
            earlier.run.started = f"2026-11-2{i}T00:00:00+00:00"
            history.record(earlier, tmp_path / f"p{i}")
    return db


def test_the_comparison_page_is_judged_by_the_thresholds_given(tmp_path: Path) -> None:
    """A 24% drop with the run-to-run noise known is a fail under the built-in
    regression_fail_rel (20%), a warn at 50%."""
    base = _run_folder(tmp_path / "base", results(meas(790.0, values=samples(790.0))))
    new = _run_folder(tmp_path / "new", results(meas(600.0, values=samples(600.0))))
    db = _steady_history(tmp_path)
    verdicts = []
    for extra in ([], ["--set", "thresholds.regression_fail_rel=0.5"]):
        result = _invoke("report", str(base), str(new), "--history", str(db), *extra)
        assert result.exit_code == 0, result.output
        changed = parse_page((new / "comparison.html").read_text()).table_titled(
            "Figures that changed"
        )
        (row,) = changed.rows
        verdicts.append(dict(zip(changed.header, row, strict=True))["verdict"][0])
    assert verdicts == ["regression (fail)", "regression (warn)"]


def test_report_help_explains_both_forms() -> None:
    text = " ".join(_invoke("report", "--help").output.split())
    for words in (
        "report.html",
        "comparison.html",
        "BASE NEW",
        "opens offline",
        "-o, --out, --output",
        "--match",
        "--all",
        "--history",
        "--no-history",
        "Exit codes",
    ):
        assert words in text
    assert "report" in _invoke("--help").output


def test_the_page_json_is_plain_json(small: Results) -> None:
    plots = own_figures(small)
    blob = parse_page(page_of(small, plots)).blob
    assert blob["config"]["displaylogo"] is False and blob["config"]["responsive"] is True
    assert json.loads(json.dumps(blob)) == blob
    assert {f["benchmark"] for f in blob["figures"]} == set(plots)


@pytest.mark.parametrize("full", [False, True])
def test_plotly_is_packed_once_and_then_read_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, full: bool
) -> None:
    import base64
    import gzip

    from clusterbench.report import html_assets

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    packed = html_assets.plotly_packed.__wrapped__(full)
    code = html_assets.plotly_js(full)
    assert gzip.decompress(base64.b64decode(packed)).decode() == code
    (cached,) = (tmp_path / "clusterbench").glob("*.js.gz.b64")
    assert cached.read_text() == packed
    assert len(packed) < 0.45 * len(code)  # 1.5 MB -> 0.66 MB; 4.8 MB -> 2.0 MB

    def no_compressing(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("compressed again")

    monkeypatch.setattr(gzip, "compress", no_compressing)
    assert html_assets.plotly_packed.__wrapped__(full) == packed  # read back, not compressed


def test_the_install_holds_plotlys_partial_bundle_and_pages_carry_it() -> None:
    """The build (hatch_build.py) put the cartesian bundle, its license and version beside the
    package; a page of cartesian traces carries it, one with another trace type the full
    bundle (both as plotly ships them, told apart by their own headers)."""
    from clusterbench.report import html_assets

    bundle = html_assets.partial_bundle()
    assert bundle is not None, "built without npm: run `npm ci`, then `pip install -e .` again"
    assert "MIT" in bundle.with_name(bundle.name + ".LICENSE").read_text()
    assert bundle.with_name(bundle.name + ".version").read_text().split() == [
        "plotly.js-cartesian-dist-min",
        json.loads((ROOT / "package.json").read_text())["dependencies"][
            "plotly.js-cartesian-dist-min"
        ],
    ]
    partial, full = html_assets.plotly_js(), html_assets.plotly_js(True)
    assert 1_000_000 < len(partial) < 0.4 * len(full)
    assert partial.startswith("/**\n* plotly.js (cartesian - minified) v")
    assert full.startswith("/**\n* plotly.js v")
    lines = {"data": [{"type": "scatter"}, {"y": [1]}]}
    assert not html_assets.needs_full_bundle([lines, {"data": [{"type": "heatmap"}]}])
    assert html_assets.needs_full_bundle([lines, {"data": [{"type": "funnel"}]}])
    assert not html_assets.needs_full_bundle([])
