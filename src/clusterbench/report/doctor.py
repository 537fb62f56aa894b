"""``clusterbench doctor``: findings as a rich table, worst first."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from clusterbench.report.console import SEVERITY_STYLE, severity_counts
from clusterbench.schema import SEVERITY_ORDER, Finding

__all__ = ["render_findings"]


def render_findings(findings: Sequence[Finding], console: Console, *, host: str) -> None:
    """Print one node's doctor findings (fail, warn, info) and a one-line count."""
    summary = severity_counts(findings) or "nothing found"
    console.print(f"[bold]Doctor[/bold] {escape(host)}: {summary}")
    if not findings:
        return
    table = Table(show_lines=True)
    for column in ("severity", "id", "scope", "message", "fix"):
        table.add_column(column, overflow="fold")
    for f in sorted(findings, key=lambda f: (SEVERITY_ORDER[f.severity], f.id, f.scope)):
        table.add_row(
            f"[{SEVERITY_STYLE[f.severity]}]{f.severity.upper()}[/]",
            escape(f.id),
            escape(f.scope),
            escape(f.message),
            escape(f.fix),
        )
    console.print(table)
