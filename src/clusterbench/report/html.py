"""report.html: the run as one self-contained page that opens offline.

The page carries everything it shows: plotly's JavaScript inlined once, every figure in one
JSON blob (``<script type="application/json" id="cb-data">``: per figure its benchmark,
title, plotly data and layout) drawn by a small inline script, the style sheet, and a sort
script for the tables.  It fetches nothing: no CDN, no fonts, no MathJax, no map tiles.

Top to bottom: the comparison (``clusterbench report BASE NEW``), the verdict with the
findings and their fixes, what to change (the advice ranked by gain), the hardware, the run's
meta and where its time went, a table of contents, then per benchmark its plots, each beside
the table it draws (the plot's own, else the section's), and the rest of the benchmark's
section as sortable tables.  A plot without data (a benchmark whose figures could not be
drawn) is shown as its note alone.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from html import escape
from typing import Any

from clusterbench.analyses.compare.comparison import Comparison
from clusterbench.analyses.run import RunAnalysis
from clusterbench.report.advice import ADVICE_TITLE
from clusterbench.report.drain import drain_html
from clusterbench.report.html_assets import (
    CSS,
    DRAW_JS,
    LOAD_JS,
    PLOTLY_CONFIG,
    SORT_JS,
    needs_full_bundle,
    plotly_packed,
)
from clusterbench.report.html_compare import comparison_block
from clusterbench.report.html_header import (
    advice_block,
    hardware_block,
    meta_block,
    verdict_block,
    wall_time_block,
)
from clusterbench.report.html_tables import section_blocks, table_of
from clusterbench.schema import Results
from clusterbench.views.cells import Grid, Matrix, Section
from clusterbench.views.plots import Plot

__all__ = ["FETCHING_TRACES", "render_html"]

FETCHING_TRACES = frozenset(
    {
        "scattergeo",
        "choropleth",
        "scattermap",
        "choroplethmap",
        "densitymap",
        "scattermapbox",
        "choroplethmapbox",
        "densitymapbox",
    }
)
"""Trace types plotly draws from map tiles or topojson it downloads: never drawn here."""
_MATRIX_BESIDE_MAX = 12
"""A matrix of more devices than this folds below its heatmap instead of standing beside it."""
_TABLES_BESIDE = 2
_TABLES_OPEN = 6
"""A benchmark's tables shown below its plots; more are folded under one line."""


def render_html(run: RunAnalysis, *, show_all: bool = False) -> str:
    """The page of ``run``: its sections and plots, its comparison (when it has one) at the
    top; ``show_all``: the comparison's unchanged rows listed too."""
    results, sections, plots = run.results, run.sections, run.plots
    comparison, base = run.comparison, run.base
    figures: list[dict[str, Any]] = []
    body = [_title(results, comparison, base)]
    if comparison is not None:
        body.append(
            f'<section id="comparison"><h2>Comparison</h2>'
            f"{comparison_block(comparison, show_all=show_all)}</section>"
        )
    body.append(f'<section id="verdict"><h2>Verdict</h2>{verdict_block(run)}</section>')
    advice = advice_block(run)
    if advice:
        body.append(f'<section id="advice"><h2>{ADVICE_TITLE}</h2>{advice}</section>')
    drain = drain_html(run.drain)
    if drain:
        body.append(f'<section id="drain"><h2>Drain list</h2>{drain}</section>')
    body.append(
        '<section id="run"><div class="cols">'
        f"<div><h2>Hardware</h2>{hardware_block(results.hosts)}</div>"
        f"<div><h2>Run</h2>{meta_block(results)}{wall_time_block(results)}</div>"
        "</div></section>"
    )
    ids = _anchors([s.benchmark for s in sections] + [b for b in plots if not _has(sections, b)])
    blocks = [
        _benchmark(s, plots.get(s.benchmark, ()), results, anchor=ids[s.benchmark], out=figures)
        for s in sections
    ]
    blocks += [  # plots of a benchmark without a section (none of today's)
        _benchmark(Section(name), ps, results, anchor=ids[name], out=figures)
        for name, ps in plots.items()
        if not _has(sections, name)
    ]
    body.append(
        _toc(
            list(ids.items()),
            results,
            comparison is not None,
            advice=bool(advice),
            drain=bool(drain),
        )
    )
    body.extend(blocks if blocks else ["<section><p>No measurements.</p></section>"])
    return _page(_page_title(results, comparison), "".join(body), figures)


def _has(sections: Sequence[Section], name: str) -> bool:
    return any(s.benchmark == name for s in sections)


def _page_title(results: Results, comparison: Comparison | None) -> str:
    if comparison is not None:
        return f"clusterbench: {comparison.base.id} -> {comparison.new.id}"
    return f"clusterbench run {results.run.id}"


def _title(results: Results, comparison: Comparison | None, base: Results | None) -> str:
    run = results.run
    what = f"clusterbench run {run.id}"
    if comparison is not None:
        what = f"clusterbench: {comparison.base.id} → {run.id}"
    nodes = "node" if run.num_nodes == 1 else "nodes"
    ranks = "rank" if run.world_size == 1 else "ranks"
    sub = f"suite {run.suite} · {run.world_size} {ranks} · {run.num_nodes} {nodes} · {run.started}"
    if base is not None:
        sub += f" · plots drawn against base run {base.run.id}"
    return f'<h1>{escape(what)}</h1><p class="dim">{escape(sub)}</p>'


def _anchors(names: list[str]) -> dict[str, str]:
    """A unique HTML id per benchmark name."""
    ids: dict[str, str] = {}
    for name in names:
        slug = "b-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "x")
        while slug in ids.values():
            slug += "-"
        ids[name] = slug
    return ids


def _toc(
    entries: list[tuple[str, str]], results: Results, compared: bool, *, advice: bool, drain: bool
) -> str:
    seconds = results.run.benchmark_seconds
    items = ['<li><a href="#comparison">Comparison</a></li>'] if compared else []
    items.append('<li><a href="#verdict">Verdict</a></li>')
    if advice:
        items.append(f'<li><a href="#advice">{ADVICE_TITLE}</a></li>')
    if drain:
        items.append('<li><a href="#drain">Drain list</a></li>')
    items.append('<li><a href="#run">Hardware and run</a></li>')
    for name, anchor in entries:
        took = f' <span class="dim">{seconds[name]:,.1f} s</span>' if name in seconds else ""
        items.append(f'<li><a href="#{anchor}">{escape(name)}</a>{took}</li>')
    return f'<nav class="toc"><h2>Contents</h2><ol>{"".join(items)}</ol></nav>'


def _drawable(plot: Plot) -> str | None:
    """Why ``plot`` is not drawn (None: it is)."""
    data = plot.figure.get("data")
    if not data:
        return "no data"
    types = {trace.get("type", "scatter") for trace in data if isinstance(trace, dict)}
    fetching = sorted(types & FETCHING_TRACES)
    if fetching:
        return f"{', '.join(fetching)} traces need map data from the network"
    return None


def _benchmark(
    section: Section,
    plots: Sequence[Plot],
    results: Results,
    *,
    anchor: str,
    out: list[dict[str, Any]],
) -> str:
    """The benchmark's plots, each beside its table (the section's first tables beside the
    first plot without one of its own), then the section's tables not shown yet (beyond
    the first few, folded)."""
    name = section.benchmark
    took = results.run.benchmark_seconds.get(name)
    heading = escape(name) + (
        f' <span class="dim">· {took:,.1f} s</span>' if took is not None else ""
    )
    html = [f'<section id="{anchor}"><h2>{heading}</h2>']
    shown: list[Grid | Matrix] = [p.table for p in plots if p.table is not None]
    blocks = section_blocks(section, shown=shown)
    # a matrix of many nodes never stands beside a plot: it is read on its heatmap
    besides = [html for block, html in blocks if not _too_wide(block)]
    rest = [html for block, html in blocks if _too_wide(block)]
    for plot in plots:
        why_not = _drawable(plot)
        if why_not is not None:
            lines = plot.notes or [f"{plot.title}: not drawn ({why_not})"]
            html.append("".join(f'<p class="note">{escape(line)}</p>' for line in lines))
            continue
        fig_id = f"cb-fig-{len(out)}"
        out.append(
            {
                "id": fig_id,
                "benchmark": name,
                "title": plot.title,
                "data": plot.figure["data"],
                "layout": plot.figure.get("layout", {}),
            }
        )
        notes = "".join(f"<li>{escape(n)}</li>" for n in plot.notes)
        figure = (
            f"<figure><figcaption>{escape(plot.title)}</figcaption>"
            f'<div class="plot" id="{fig_id}"></div>'
            + (f'<ul class="notes">{notes}</ul>' if notes else "")
            + "</figure>"
        )
        below = ""
        if _too_wide(plot.table):
            assert isinstance(plot.table, Matrix)
            # a matrix of many nodes is read on its heatmap; its values, too wide for any
            # page, fold below it (scrolled there, not hidden beside the plot)
            n = len(plot.table.devices)
            beside = ""
            below = (f"<details><summary>the {n} x {n} values of {escape(plot.title)}"
                     f"</summary>{table_of(plot.table)}</details>")  # fmt: skip
        elif plot.table is not None:
            beside = table_of(plot.table)
        else:  # the section's first tables; more would make the column far longer than the plot
            beside, besides = "".join(besides[:_TABLES_BESIDE]), besides[_TABLES_BESIDE:]
        html.append(f'<div class="pair">{figure}<div>{beside}</div></div>{below}')
    rest = besides + rest
    html.extend(rest[:_TABLES_OPEN])
    if len(rest) > _TABLES_OPEN:  # a 64-node run has a busbw and a latency table per group
        folded = "".join(rest[_TABLES_OPEN:])
        html.append(
            f"<details><summary>{len(rest) - _TABLES_OPEN} more tables of "
            f"{escape(name)}</summary>{folded}</details>"
        )
    if len(html) == 1:
        html.append('<p class="dim">Nothing to show.</p>')
    html.append("</section>")
    return "".join(html)


def _too_wide(block: Grid | Matrix | None) -> bool:
    return isinstance(block, Matrix) and len(block.devices) > _MATRIX_BESIDE_MAX


def _blob(figures: list[dict[str, Any]]) -> str:
    """The figures as JSON safe inside a script element: '<', '>' and '&' escaped, and
    non-finite numbers (which JSON has not) written as null."""
    payload = {"figures": figures, "config": PLOTLY_CONFIG}
    try:
        text = json.dumps(payload, separators=(",", ":"), allow_nan=False, default=_plain)
    except ValueError:
        text = json.dumps(_finite(payload), separators=(",", ":"), default=_plain)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _plain(value: Any) -> Any:
    """numpy arrays and scalars a figure may hold, as lists and numbers."""
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return _finite(tolist())
    raise TypeError(f"not JSON: {type(value).__name__}")


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _page(title: str, body: str, figures: list[dict[str, Any]]) -> str:
    full = needs_full_bundle(figures)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body><main>{body}</main>"
        f'<script type="application/json" id="cb-data">{_blob(figures)}</script>'
        "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>"
        f'<script type="application/octet-stream" id="cb-plotly">{plotly_packed(full)}</script>'
        f"<script>{DRAW_JS}</script><script>{SORT_JS}</script><script>{LOAD_JS}</script>"
        "</body></html>\n"
    )
