"""``clusterbench doctor``: findings as a rich table, worst first."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from clusterbench.report.console import SEVERITY_STYLE, severity_counts
from clusterbench.schema import SEVERITY_ORDER, Finding

__all__ = ["problem_lines", "render_findings"]


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


def _one_line(text: str) -> str:
    return " ".join(text.split())


def problem_lines(findings: Sequence[Finding], *, host: str, elapsed_s: float) -> list[str]:
    """``doctor --fast`` for a scheduler's log: one plain line per fail and warn finding, worst
    first, then a last line with the verdict (no colour, no table, nothing wrapped)."""
    problems = sorted(
        (f for f in findings if f.severity != "info"),
        key=lambda f: (SEVERITY_ORDER[f.severity], f.id, f.scope),
    )
    lines = [
        f"{f.severity.upper()} {f.id} {f.scope}: {_one_line(f.message)}"
        + (f" | fix: {_one_line(f.fix)}" if f.fix else "")
        for f in problems
    ]
    failed = any(f.severity == "fail" for f in findings)
    counts = severity_counts(findings) or "nothing found"
    verdict = "FAIL" if failed else "OK"
    lines.append(f"clusterbench doctor --fast {host}: {verdict} ({counts}) in {elapsed_s:.1f} s")
    return lines
