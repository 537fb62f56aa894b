"""The HTML report in a real browser: headless Chromium through selenium opens the
report.html of a real CPU run and the page of a synthetic multi-node run.

Each page must draw without a JavaScript error, every plot with data points, a screenshot
that is not blank, its embedded data equal to what results.json says, no request other than
file:, data: or about:, and no reference to another host in the file.  Chromium and
chromedriver are Debian's packages (CI installs them): without them these tests fail.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from clusterbench import catalog
from clusterbench.analyses.run import analyze, report_plots, summary_sections
from clusterbench.pipeline.finish import REPORT_FILE
from clusterbench.report.html import render_html
from clusterbench.report.html_assets import needs_full_bundle, plotly_js
from clusterbench.schema import Results, load_results
from clusterbench.thresholds import Thresholds
from clusterbench.views.plots import Plot
from tests.helpers import cli
from tests.html_page import external_references, plotly_in
from tests.pages import analysis
from tests.prediction_runs import run_of
from tests.report_figures import own_figures
from tests.synthetic_cluster import cluster_results
from tests.unit.test_nccl_tune import TREE_LL, default, repeats, rows_of
from tests.unit.test_telemetry import results_of, sampled

pytestmark = pytest.mark.browser

catalog.register_builtin()

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)
_LOCAL_SCHEMES = ("file:", "data:", "about:")
_REMOTE_SCHEMES = ("http:", "https:", "ws:", "wss:", "ftp:")
# What Plotly draws a point, a bar, a line or a heatmap as
_DRAWN = ".point, .js-line, .hm image, .heatmaplayer image"


@dataclass
class Opened:
    severe: list[dict[str, Any]]
    requests: list[tuple[str, str]]
    """(the document that made it, the URL) of every request the browser made: the page's,
    and the browser's own (chrome:// pages of its empty tab)."""
    plots: list[dict[str, Any]]
    blob: dict[str, Any]
    png: bytes
    hidden: list[str]
    """The tables beside a plot that hide columns behind a scrollbar (their first words)."""
    toolbar_over: list[str]
    """The plots whose toolbar covers their legend (:func:`toolbar_over_legend`)."""


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    assert CHROMIUM.exists() and CHROMEDRIVER.exists(), (
        f"the browser tests need {CHROMIUM} and {CHROMEDRIVER} (apt-get install chromium "
        "chromium-driver)"
    )
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in _FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def open_page(driver: webdriver.Chrome, path: Path, *, timeout_s: float = 120) -> Opened:
    driver.get_log("performance")  # what the browser did before the page is not the page's
    driver.get_log("browser")
    driver.get(path.resolve().as_uri())
    deadline = time.monotonic() + timeout_s
    while driver.execute_script("return document.body.getAttribute('data-plots-drawn')") is None:
        assert time.monotonic() < deadline, "the page did not finish drawing its plots"
        time.sleep(0.2)
    plots = driver.execute_script(
        """var drawn = arguments[0];
           return Array.from(document.querySelectorAll('div.plot')).map(function (gd) {
             var points = 0;
             (gd.data || []).forEach(function (t) {
               ['x', 'y', 'z'].forEach(function (k) { if (t[k]) points += t[k].length; });
             });
             return {id: gd.id, traces: (gd._fullData || []).length, points: points,
                     drawn: gd.querySelectorAll(drawn).length,
                     svg: gd.querySelectorAll('svg.main-svg').length};
           });""",
        _DRAWN,
    )
    requests = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            params = message["params"]
            requests.append((params.get("documentURL", ""), params["request"]["url"]))
    blob = driver.execute_script(
        "return JSON.parse(document.getElementById('cb-data').textContent)"
    )
    hidden = driver.execute_script(
        """return Array.from(document.querySelectorAll('.pair .tbl'))
             .filter(function (e) { return e.scrollWidth > e.clientWidth + 1; })
             .map(function (e) { return e.textContent.slice(0, 60); });"""
    )
    driver.execute_script("window.scrollTo(0, 0)")
    return Opened(
        hidden=hidden,
        toolbar_over=toolbar_over_legend(driver),
        severe=[e for e in driver.get_log("browser") if e["level"] == "SEVERE"],
        requests=requests,
        plots=plots,
        blob=blob,
        png=driver.get_screenshot_as_png(),
    )


def assert_sound(opened: Opened, html: str) -> None:
    """No JavaScript error, every plot drawn with points, a screenshot of more than a few
    colours, nothing fetched from elsewhere and nothing in the file that would."""
    assert opened.severe == []
    assert opened.hidden == []  # no table beside a plot hides columns behind a scrollbar
    # plotly's toolbar, on hover, hides no legend entry of a figure that places its legend
    # (the tests' own figures leave theirs to plotly, right of the plot)
    placed = {f["id"] for f in opened.blob["figures"] if "legend" in f.get("layout", {})}
    assert [o for o in opened.toolbar_over if o.split(":")[0] in placed] == []
    assert opened.plots, "no plot on the page"
    for plot in opened.plots:
        assert plot["traces"] > 0 and plot["points"] > 0, plot
        assert plot["svg"] > 0 and plot["drawn"] > 0, plot
    assert [p["id"] for p in opened.plots] == [f["id"] for f in opened.blob["figures"]]
    image = Image.open(io.BytesIO(opened.png)).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50
    page = [url for document, url in opened.requests if document.startswith("file:")]
    assert page and all(url.startswith(_LOCAL_SCHEMES) for url in page), [
        url[:80] for url in page if not url.startswith(_LOCAL_SCHEMES)
    ]
    remote = [url for _, url in opened.requests if url.lower().startswith(_REMOTE_SCHEMES)]
    assert remote == []
    assert external_references(html) == []
    (plotly,) = plotly_in(html)  # plotly.js once, compressed: the partial bundle, unless a
    assert plotly == plotly_js(needs_full_bundle(opened.blob["figures"]))  # trace needs all


def toolbar_over_legend(driver: webdriver.Chrome) -> list[str]:
    """The plots whose toolbar (plotly's modebar, shown on hover) covers their legend, each as
    'id: modebar (left, top, right, bottom) over legend (...)'."""
    found: list[str] = driver.execute_script(
        """function box(e) { var r = e.getBoundingClientRect();
                             return [r.left, r.top, r.right, r.bottom].map(Math.round); }
           function over(a, b) { return a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3]; }
           var found = [];
           document.querySelectorAll('div.plot').forEach(function (gd) {
             var bar = gd.querySelector('.modebar');
             if (!bar) return;
             var a = box(bar);
             gd.querySelectorAll('g.legend').forEach(function (e) {
               var b = box(e);
               if (over(a, b)) found.push(gd.id + ': modebar ' + a + ' over legend ' + b);
             });
           });
           return found;"""
    )
    return found


def as_json(plots: dict[str, list[Plot]], results: Results) -> list[dict[str, Any]]:
    """The figures as the page must carry them (benchmark, title, data, layout), in the order
    of the run's sections, as plain JSON."""
    order = [s.benchmark for s in summary_sections(results)]
    order += [name for name in plots if name not in order]
    figures = [
        {
            "benchmark": name,
            "title": p.title,
            "data": p.figure["data"],
            "layout": p.figure.get("layout", {}),
        }
        for name in order
        for p in plots.get(name, [])
        if p.figure.get("data")
    ]
    loaded: list[dict[str, Any]] = json.loads(json.dumps(figures))
    return loaded


def without_ids(figures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in f.items() if k != "id"} for f in figures]


def assert_values_from(
    blob: dict[str, Any], raw: dict[str, Any], plots: dict[str, list[Plot]]
) -> None:
    """Bars and lines of our own figures draw measurement values: each equals a value of that
    benchmark in results.json read as plain JSON, in the order the figure took them."""
    values: dict[str, list[float]] = {}
    for m in raw["measurements"]:
        values.setdefault(m["benchmark"], []).append(m["value"])
    own = {(name, p.title) for name, ps in plots.items() for p in ps}
    checked = 0
    for figure in blob["figures"]:
        if (figure["benchmark"], figure["title"]) not in own:
            continue
        for trace in figure["data"]:
            for y in trace.get("y", []) if trace["type"] != "heatmap" else []:
                assert y in values[figure["benchmark"]]
                checked += 1
    assert checked > 0


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run: the quick suite on two CPU workers, its report.html written at its end."""
    out = tmp_path_factory.mktemp("html") / "run"
    proc = cli(
        "run",
        "--suite",
        "quick",
        "--device",
        "cpu",
        "--nproc",
        "2",
        "--no-history",
        "--out",
        str(out),
        timeout=600,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    assert f"report: {out / REPORT_FILE}" in proc.stdout.splitlines()
    return out


@pytest.mark.dist
def test_the_report_of_a_real_run_in_chromium(cpu_run: Path, chromium: webdriver.Chrome) -> None:
    page = cpu_run / REPORT_FILE
    html = page.read_text(encoding="utf-8")
    results = load_results(cpu_run)
    expected = report_plots(results)
    assert sum(len(ps) for ps in expected.values()) > 0
    opened = open_page(chromium, page)
    assert_sound(opened, html)
    # the embedded figures are those results.json gives, value for value
    assert without_ids(opened.blob["figures"]) == as_json(expected, results)
    assert {f["benchmark"] for f in opened.blob["figures"]} <= {
        m.benchmark for m in results.measurements
    }
    assert "run completed" in chromium.find_element(By.CSS_SELECTOR, ".verdict").text
    # plotly.js's partial bundle compressed (1.5 MB -> 0.66 MB) and the quick run's figures
    assert plotly_in(html) == [plotly_js()]
    assert page.stat().st_size <= 1_500_000


@pytest.mark.dist
def test_a_real_run_with_figures_of_every_kind(
    cpu_run: Path, chromium: webdriver.Chrome, tmp_path: Path
) -> None:
    """Our own bars, log-axis lines and heatmaps beside the real figures; the values they
    draw are those of results.json."""
    results = load_results(cpu_run)
    raw = json.loads((cpu_run / "results.json").read_text(encoding="utf-8"))
    own = own_figures(results)
    plots = _merged(report_plots(results), own)
    page = tmp_path / "report.html"
    html = render_html(analysis(results, plots=plots))
    page.write_text(html, encoding="utf-8")
    opened = open_page(chromium, page)
    assert_sound(opened, html)
    assert without_ids(opened.blob["figures"]) == as_json(plots, results)
    assert_values_from(opened.blob, raw, own)


def test_a_figure_the_partial_bundle_cannot_draw_gets_the_full_one(
    chromium: webdriver.Chrome, tmp_path: Path
) -> None:
    """A plugin's figure of a trace type outside the cartesian bundle (a funnel): the page
    carries plotly's full bundle, once, and draws it beside the others."""
    results = cluster_results(num_hosts=2, gpus_per_host=2)
    plots = own_figures(results)
    name = next(iter(plots))
    ys = [m.value for m in results.measurements[:4]]
    funnel = {"data": [{"type": "funnel", "y": ["a", "b", "c", "d"], "x": ys}], "layout": {}}
    plots[name] = [*plots[name], Plot(title="a plugin's funnel", figure=funnel)]
    html = render_html(analysis(results, plots=_merged(report_plots(results), plots)))
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    opened = open_page(chromium, page)
    assert_sound(opened, html)
    assert plotly_in(html) == [plotly_js(True)]
    drawn = next(f for f in opened.blob["figures"] if f["title"] == "a plugin's funnel")
    assert drawn["data"][0]["x"] == ys


def test_an_imported_nccl_tests_run_in_chromium(chromium: webdriver.Chrome, tmp_path: Path) -> None:
    """nccl-tests' real outputs imported (clusterbench import): the page draws the busbw
    figure from them, and carries the partial bundle."""
    data = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"
    out = tmp_path / "run"
    proc = cli("import", "nccl-tests", *map(str, sorted(data.glob("*.txt"))), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    page = out / REPORT_FILE
    html = page.read_text(encoding="utf-8")
    opened = open_page(chromium, page)
    assert_sound(opened, html)
    assert plotly_in(html) == [plotly_js()] and page.stat().st_size <= 1_500_000
    results = load_results(out)
    assert without_ids(opened.blob["figures"]) == as_json(report_plots(results), results)
    assert {f["benchmark"] for f in opened.blob["figures"]} == {"collectives"}


def test_an_analyze_run_of_real_traces_in_chromium(
    chromium: webdriver.Chrome, tmp_path: Path
) -> None:
    """clusterbench analyze of two real CPU ranks' traces (a planted straggler): the page draws
    the attribution figures and shows the top kernels' table, no column hidden."""
    traces = Path(__file__).resolve().parents[1] / "data" / "traces" / "cpu-gloo-slow-rank"
    out = tmp_path / "run"
    proc = cli("analyze", str(traces), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    page = out / REPORT_FILE
    html = page.read_text(encoding="utf-8")
    opened = open_page(chromium, page)
    assert_sound(opened, html)
    results = load_results(out)
    assert without_ids(opened.blob["figures"]) == as_json(report_plots(results), results)
    assert {f["benchmark"] for f in opened.blob["figures"]} == {"attribution"}
    assert "top kernels by device time" in chromium.find_element(By.TAG_NAME, "main").text


def test_a_synthetic_multi_node_run_in_chromium(chromium: webdriver.Chrome, tmp_path: Path) -> None:
    results = cluster_results(num_hosts=16, gpus_per_host=8)
    path = tmp_path / "results.json"
    path.write_text(results.model_dump_json(), encoding="utf-8")
    raw = json.loads(path.read_text(encoding="utf-8"))
    own = own_figures(results)
    plots = _merged(report_plots(results), own)
    html = render_html(analysis(results, plots=plots))
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    opened = open_page(chromium, page)
    assert_sound(opened, html)
    assert without_ids(opened.blob["figures"]) == as_json(plots, results)
    assert_values_from(opened.blob, raw, own)
    heat = next(
        f for f in opened.blob["figures"] if f["title"] == "TCP throughput, sender x receiver"
    )
    tcp = {
        (m["params"]["src_host"], m["params"]["dst_host"]): m["value"]
        for m in raw["measurements"]
        if m["metric"] == "tcp_throughput"
    }
    hosts = heat["data"][0]["x"]
    for i, src in enumerate(hosts):
        for j, dst in enumerate(hosts):
            assert heat["data"][0]["z"][i][j] == tcp.get((src, dst))
    verdict = chromium.find_element(By.CSS_SELECTOR, ".verdict")
    assert verdict.text == "run completed · findings: 1 fail, 2 warn, 1 info"
    assert verdict.get_attribute("class") == "verdict fail"


def test_the_prediction_curves_in_chromium(chromium: webdriver.Chrome, tmp_path: Path) -> None:
    """A run of 2 nodes with training and collectives: the prediction's two plots (lines,
    filled bands, markers on a log axis) draw, with the data the prediction computed."""
    results = run_of(num_nodes=2)
    plots = report_plots(results)
    assert [p.title for p in plots["prediction"]] == [
        "Predicted weak-scaling efficiency of 1.3b (8 GPUs per node, 1,277 Gb/s per node)",
        "Step time of 1.3b: measured, validated and predicted",
    ]
    html = render_html(analysis(results, plots=plots))
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    opened = open_page(chromium, page)
    assert_sound(opened, html)
    assert without_ids(opened.blob["figures"]) == as_json(plots, results)
    drawn = [f for f in opened.blob["figures"] if f["benchmark"] == "prediction"]
    assert len(drawn) == 2
    ids = [f["id"] for f in drawn]
    filled = chromium.execute_script(
        "return arguments[0].map(function (id) {"
        "  return document.getElementById(id).querySelectorAll('.js-fill').length; });",
        ids,
    )
    assert all(n >= 2 for n in filled), filled  # each strategy's band is drawn as an area


def test_the_telemetry_figure_in_chromium(chromium: webdriver.Chrome, tmp_path: Path) -> None:
    """A GPU run's telemetry figure, drawn from the CSV series in its run folder: three panels
    on one time axis (SM clock, power with its limit, temperature), throttled samples marked."""
    _, (first, _), window = sampled(tmp_path)
    assert first is not None
    results = results_of(first, window)
    plots = report_plots(results, run_dir=tmp_path)
    html = render_html(analysis(results, plots=plots))
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    opened = open_page(chromium, page)
    assert_sound(opened, html)
    assert without_ids(opened.blob["figures"]) == as_json(plots, results)
    [drawn] = [f for f in opened.blob["figures"] if f["title"] == "gemm: GPU telemetry"]
    panels = chromium.execute_script(
        "return document.getElementById(arguments[0])"
        ".querySelectorAll('.cartesianlayer .subplot').length",
        drawn["id"],
    )
    assert panels == 3


def test_what_to_change_is_a_visible_table_above_the_hardware(
    chromium: webdriver.Chrome, tmp_path: Path
) -> None:
    """A run of 2 nodes whose NCCL tuning found a faster setting: its advice, ranked by gain
    above the prediction's, is a table the browser shows after the verdict, before the
    hardware; a click on its gain column sorts by the speed-up."""
    results = run_of(num_nodes=2)
    results.measurements += default() + rows_of(TREE_LL, repeats(70.0, n=7))
    # at 85% the bandwidth to provision is within eight 800G NICs, so it is advice
    results.findings = analyze(results, Thresholds(prediction_target_efficiency=0.85))
    page = tmp_path / "report.html"
    page.write_text(render_html(analysis(results, plots={})), encoding="utf-8")
    open_page(chromium, page)
    table = chromium.find_element(By.CSS_SELECTOR, "#advice table")
    assert table.is_displayed()
    verdict, hardware = (chromium.find_element(By.ID, i) for i in ("verdict", "run"))
    assert verdict.location["y"] < table.location["y"] < hardware.location["y"]

    def rows() -> list[list[str]]:
        return [
            [td.text for td in r.find_elements(By.TAG_NAME, "td")]
            for r in table.find_elements(By.CSS_SELECTOR, "tbody tr")
        ]

    shown = rows()
    assert shown[0][1] == f"export {TREE_LL}"
    assert shown[0][2].startswith("−30% all_reduce time") and shown[0][5] == "collectives"
    assert shown[1][3].startswith("predicted ±") and shown[1][5] == "prediction"
    gain = table.find_elements(By.CSS_SELECTOR, "thead th")[2]
    gain.click()  # ascending: the smaller speed-up first
    assert [r[5] for r in rows()] == ["prediction", "collectives"]


def test_a_click_on_a_header_sorts_by_the_number_not_the_text(
    chromium: webdriver.Chrome, tmp_path: Path
) -> None:
    results = cluster_results(num_hosts=2, gpus_per_host=2)
    # by number 1,000.0 is the largest; by its text it would sort before 9.5
    results.run.benchmark_seconds = {"a": 10.0, "b": 9.5, "c": 100.0, "d": 1000.0}
    page = tmp_path / "report.html"
    page.write_text(render_html(analysis(results, plots={})), encoding="utf-8")
    open_page(chromium, page)
    table = chromium.find_element(
        By.XPATH, "//p[starts-with(., 'Where the time went')]/following-sibling::div[1]//table"
    )

    def column(n: int) -> list[str]:
        return [
            r.find_elements(By.TAG_NAME, "td")[n].text
            for r in table.find_elements(By.CSS_SELECTOR, "tbody tr")
        ]

    assert column(0) == ["d", "c", "a", "b"]  # slowest first as rendered
    header = table.find_elements(By.CSS_SELECTOR, "thead th")
    header[1].click()
    assert column(0) == ["b", "a", "c", "d"] and header[1].get_attribute("aria-sort") == "ascending"
    header[1].click()
    assert (
        column(0) == ["d", "c", "a", "b"] and header[1].get_attribute("aria-sort") == "descending"
    )
    header[0].click()
    assert column(0) == ["a", "b", "c", "d"]


def _merged(*sources: dict[str, list[Plot]]) -> dict[str, list[Plot]]:
    out: dict[str, list[Plot]] = {}
    for plots in sources:
        for name, ps in plots.items():
            out.setdefault(name, []).extend(ps)
    return out
