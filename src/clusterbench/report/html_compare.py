"""A comparison at the top of the HTML report (``clusterbench report BASE NEW``): what was
compared, the counts, the regressions with their fix, what changed between the runs, and the
rows that changed in a sortable table with each verdict coloured."""

from __future__ import annotations

from html import escape

from clusterbench.analyses.compare.comparison import Comparison, ComparisonRow
from clusterbench.report.compare import (
    HEADER,
    counts_line,
    header_line,
    row_cells,
    shown_rows,
    unchanged_line,
)
from clusterbench.report.html_header import severity_counts
from clusterbench.report.html_tables import Cell, findings_table, table

__all__ = ["comparison_block", "comparison_level"]

_VERDICT_ORDER = {"regression": 0, "improvement": 1, "new": 2, "missing": 3, "unchanged": 4}


def comparison_level(c: Comparison) -> str:
    """'fail', 'warn' (a regression short of a fail) or 'ok'."""
    if c.failed:
        return "fail"
    return "warn" if c.count("regression") else "ok"


def _cells(r: ComparisonRow, c: Comparison) -> list[Cell]:
    name, params, where, unit, base, new, change, verdict, noise = row_cells(r, c)
    return [
        name,
        params,
        where,
        unit,
        (base, r.base),
        (new, r.new),
        (change, r.change),
        (verdict, float(_VERDICT_ORDER[r.verdict]), f"verdict v-{r.verdict}"),
        noise,
    ]


def comparison_block(c: Comparison, *, show_all: bool = False) -> str:
    """The comparison's verdict and table (the unchanged rows counted, or with ``show_all``
    listed too)."""
    regressions = severity_counts(c.findings)
    verdict = f"{counts_line(c)} · regressions: {regressions}" if regressions else counts_line(c)
    html = [
        f"<p>{escape(header_line(c))}</p>",
        f'<div class="verdict {comparison_level(c)}">{escape(verdict)}</div>',
    ]
    if c.note:
        html.append(f'<p class="note">{escape(c.note)}</p>')
    if c.findings:
        html.append("<h3>Regressions</h3>" + findings_table(c.findings))
    rows = shown_rows(c, show_all=show_all)
    if rows:
        html.append(
            table(
                HEADER,
                (_cells(r, c) for r in rows),
                title="Figures that changed" if not show_all else "Every figure",
            )
        )
    unchanged = unchanged_line(c)
    if unchanged:
        hidden = "" if show_all else " (not listed; --all lists them)"
        html.append(f'<p class="dim">{escape(unchanged + hidden)}</p>')
    if c.base.kind == "run":
        changes = "".join(f"<li>{escape(str(m))}</li>" for m in c.metadata)
        html.append(
            f"<h3>What changed between the runs</h3><ul>{changes}</ul>"
            if changes
            else "<p>Run metadata: nothing changed (versions, GPUs, nodes, config).</p>"
        )
    return "".join(html)
