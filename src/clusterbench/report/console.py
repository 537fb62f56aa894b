"""The end-of-run summary in the terminal (rich): achieved figures next to their limits,
then the findings with their fixes, the errors and what did not finish."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from clusterbench.report.cells import (
    ROW_HEADER,
    Grid,
    Matrix,
    Section,
    header_line,
    matrix_cell,
    matrix_title,
    row_cells,
    sorted_findings,
)
from clusterbench.schema import Finding, Results

__all__ = ["render_summary"]

SEVERITY_STYLE = {"fail": "bold red", "warn": "yellow", "info": "cyan"}


def render_summary(results: Results, sections: Sequence[Section], console: Console) -> None:
    """Header, one table per benchmark section, findings, errors, and what did not finish."""
    console.print(Text(header_line(results), style="bold"))
    if not sections:
        console.print("No measurements.")
    for section in sections:
        _print_section(section, console)
    _print_findings(results, console)
    _print_errors(results, console)
    _print_unfinished(results, console)


def _print_section(section: Section, console: Console) -> None:
    if section.rows:
        console.print(_rows_table(section))
    else:  # the rows table's title names the section; without rows, say what follows
        console.print(Text(section.benchmark, style="bold"))
    for matrix in section.matrices:
        _print_matrix(matrix, console)
    for grid in section.grids:
        _print_grid(grid, console)


def _rows_table(section: Section) -> Table:
    # Columns that would say the same on every row go: the device count moves to the title,
    # and without any reference (a CPU run, an unknown SKU) the last two columns go.
    counts = {row.num_devices for row in section.rows}
    title = section.benchmark
    keep = list(range(len(ROW_HEADER)))
    if len(counts) == 1:
        n = counts.pop()
        title += f" · {n} device{'s' if n != 1 else ''}"
        keep.remove(ROW_HEADER.index("devices"))
    if all(row.reference is None for row in section.rows):
        keep = keep[:-2]
    table = Table(title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD)
    for i in keep:
        table.add_column(ROW_HEADER[i], justify="left" if i < 2 else "right")
    for row in section.rows:
        cells = row_cells(row)
        table.add_row(*(Text(cells[i]) for i in keep))  # Text: labels are never read as markup
    return table


def _print_matrix(matrix: Matrix, console: Console) -> None:
    # The title as its own line: a narrow matrix would wrap a table title.
    console.print(Text(matrix_title(matrix), style="italic"))
    table = Table(header_style="bold", box=box.SIMPLE_HEAD)
    table.add_column(Text(matrix.corner))
    for device in matrix.devices:
        table.add_column(device, justify="right")
    for src in matrix.devices:
        table.add_row(Text(src), *(Text(matrix_cell(matrix, src, dst)) for dst in matrix.devices))
    console.print(table)
    if matrix.no_peer_access:
        console.print("* no peer access: copies go through host memory")


def _print_grid(grid: Grid, console: Console) -> None:
    console.print(Text(grid.title, style="italic"))
    table = Table(header_style="bold", box=box.SIMPLE_HEAD)
    # the first column names the row (a model, a device): never shrunk to an ellipsis
    first = min(24, max((len(row[0]) for row in grid.rows if row), default=0))
    for i, name in enumerate(grid.header):
        if i == 0:
            table.add_column(name, justify="left", min_width=first, no_wrap=True)
        else:
            table.add_column(name, justify="right")
    for row in grid.rows:
        table.add_row(*(Text(c) for c in row))
    console.print(table)


def severity_counts(findings: Iterable[Finding]) -> str:
    """'2 fail, 1 info': how many findings of each severity, most severe first ('' if none)."""
    findings = list(findings)
    counts = {s: sum(f.severity == s for f in findings) for s in SEVERITY_STYLE}
    return ", ".join(f"{n} {s}" for s, n in counts.items() if n)


def _print_findings(results: Results, console: Console) -> None:
    print_findings(results.findings, console, title="Findings", none="No findings.")


def print_findings(findings: Iterable[Finding], console: Console, *, title: str, none: str) -> None:
    """Findings most severe first, each with its fix: ``TITLE: 2 fail, 1 info`` above them, or
    ``none`` when there are none."""
    findings = sorted_findings(findings)
    if not findings:
        console.print(Text(none, style="green"))
        return
    console.print(Text(f"{title}: ", style="bold") + Text(severity_counts(findings)))
    for f in findings:
        line = Text(f"{f.severity.upper():<5}", style=SEVERITY_STYLE.get(f.severity, ""))
        line.append(f" {f.scope}  ", style="dim")
        line.append(f.message)
        console.print(line)
        if f.fix:
            console.print(Text("      fix: ", style="bold") + Text(f.fix))


def _print_errors(results: Results, console: Console) -> None:
    for err in results.errors:
        where = " ".join(
            part
            for part in (
                err.benchmark,
                f"rank {err.rank}" if err.rank is not None else None,
                f"host {err.host}" if err.host else None,
            )
            if part
        )
        line = Text("ERROR", style="bold red") + Text(f" {where}: " if where else " ")
        console.print(line + Text(err.message))


def _print_unfinished(results: Results, console: Console) -> None:
    run = results.run
    if run.unfinished:
        console.print(Text("Did not finish: ", style="bold red") + Text(", ".join(run.unfinished)))
    for name, why in run.skipped.items():
        console.print(Text("Skipped: ", style="bold") + Text(f"{name}: {why}"))
