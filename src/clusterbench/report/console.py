"""The end-of-run summary in the terminal (rich): achieved figures next to their limits,
then the findings with their fixes, what to change (the top of :mod:`.advice`, where the
user's eye lands last), the errors and what did not finish."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from clusterbench.analyses.run import RunAnalysis
from clusterbench.analyses.soak.section import soak_line
from clusterbench.report.advice import ADVICE_TITLE, advice_table
from clusterbench.report.drain import drain_lines
from clusterbench.report.timing import phase_line, time_line
from clusterbench.report.verdict import verdict_lines
from clusterbench.schema import Finding, Results
from clusterbench.views.cells import (
    Grid,
    Matrix,
    Section,
    error_where,
    findings_and_notes,
    header_line,
    matrix_cell,
    matrix_title,
    rows_layout,
    sorted_findings,
)

__all__ = ["render_summary"]

SEVERITY_STYLE = {"fail": "bold red", "warn": "yellow", "info": "cyan"}
ADVICE_SHOWN = 5
VERDICT_SHOWN = 12
"""Verdict lines the console prints before it counts the rest."""
"""The console names the top few changes; summary.md and report.html list every one."""


def render_summary(run: RunAnalysis, console: Console, *, verbose: bool = False) -> None:
    """Header, one table per benchmark section, the verdict per node, findings, what to
    change, the drain list (after node-pair tests), errors, what did not finish, and a soak's
    rounds and drift.  The notes (info findings) are counted in one line, or with ``verbose``
    printed after the findings; ``verbose`` also prints the time of each phase of the run."""
    results, sections = run.results, run.sections
    console.print(Text(header_line(results), style="bold"))
    if not sections:
        console.print("No measurements.")
    for section in sections:
        _print_section(section, console)
    line = time_line(results)
    if line:
        console.print()
        console.print(Text(line))
    phases = phase_line(results)
    if phases and verbose:
        console.print(Text(phases))
    _print_verdict(run, console)
    _print_findings(results, console, verbose=verbose)
    print_advice(run, console)
    _print_drain(run, console)
    _print_errors(results, console)
    _print_unfinished(results, console)
    soak = soak_line(run)
    if soak:
        console.print(Text(soak, style="bold"))


def _print_verdict(run: RunAnalysis, console: Console) -> None:
    """One line per node: healthy, or what falls short of known-good (then the findings).  Of
    more than :data:`VERDICT_SHOWN` lines, those of the nodes to act on (at most that many),
    then the count of the rest; summary.md and report.html hold every line."""
    lines = verdict_lines(run)
    if lines:
        console.print()
    nodes = [line for line in lines if line.nodes]
    shown = nodes
    if len(nodes) > VERDICT_SHOWN:
        shown = [line for line in nodes if not line.healthy][:VERDICT_SHOWN]
    for text, healthy, _ in [*shown, *(line for line in lines if not line.nodes)]:
        console.print(Text(text, style="bold green" if healthy else "bold yellow"))
    rest = [line for line in nodes if line not in shown]
    if rest:
        count = sum(line.nodes for line in rest)
        well = sum(line.nodes for line in rest if line.healthy)
        which = {count: "all healthy", 0: "none healthy"}.get(well, f"{well} of them healthy")
        console.print(
            Text(
                f"{count} more nodes, {which}: summary.md and report.html give each its line",
                style="bold green" if well == count else "bold yellow",
            )
        )


def _print_section(section: Section, console: Console) -> None:
    if section.rows:
        console.print()
        layout = rows_layout(section)
        console.print(Text(layout.title, style="bold"))
        columns = [
            _Column(h, justify="left" if h in ("what", "unit") else "right", wrap=h == "what")
            for h in layout.header
        ]
        rows = [layout.cells(row) for row in section.rows]
        console.print(_table(columns, rows, width=console.width))
    elif not _first_title_names(section):
        # the rows table's title names the section; without rows, say what follows, unless
        # the first table's title does ("placement: where each rank ran")
        console.print()
        console.print(Text(section.benchmark, style="bold"))
    for matrix in section.matrices:
        _print_matrix(matrix, console)
    for grid in section.grids:
        _print_grid(grid, console)


def _first_title_names(section: Section) -> bool:
    titles = [m.title for m in section.matrices] + [g.title for g in section.grids]
    name = section.benchmark
    return bool(titles) and (titles[0] == name or titles[0].startswith((f"{name}:", f"{name} ")))


@dataclass(frozen=True, slots=True)
class _Column:
    header: str
    justify: Literal["left", "right"] = "right"
    wrap: bool = False
    """Its cells are text that may wrap at spaces (a row's label); numbers never do."""


def _table(columns: Sequence[_Column], rows: Sequence[Sequence[str]], *, width: int) -> Table:
    """A table that fits ``width`` where it can: the space between columns shrinks from 3 to
    1, and a label column wraps its words, before a number would be folded; nothing is cut to
    an ellipsis (headers stay readable)."""

    def need(i: int, column: _Column) -> int:
        cells = [column.header, *(row[i] for row in rows if i < len(row))]
        if column.wrap:  # its longest word
            return max(cell_len(word) for cell in cells for word in cell.split() or [""])
        return max(cell_len(cell) for cell in cells)

    needed = sum(need(i, c) for i, c in enumerate(columns))
    gap = next((g for g in (3, 2) if needed + g * (len(columns) - 1) <= width), 1)
    padding: tuple[int, int, int, int] = {3: (0, 1, 0, 1), 2: (0, 0, 0, 1), 1: (0, 0, 0, 0)}[gap]
    table = Table(header_style="bold", box=box.SIMPLE_HEAD, padding=padding, pad_edge=False,
                  show_edge=False)  # fmt: skip
    for column in columns:
        table.add_column(Text(column.header), justify=column.justify, overflow="fold")
    for row in rows:
        table.add_row(*(Text(c) for c in row))  # Text: labels are never read as markup
    return table


def _print_matrix(matrix: Matrix, console: Console) -> None:
    # The title as its own line: a narrow matrix would wrap a table title.
    console.print()
    console.print(Text(matrix_title(matrix), style="italic"))
    columns = [_Column(matrix.corner, justify="left", wrap=True),
               *(_Column(device) for device in matrix.devices)]  # fmt: skip
    rows = [
        (src, *(matrix_cell(matrix, src, dst) for dst in matrix.devices)) for src in matrix.devices
    ]
    console.print(_table(columns, rows, width=console.width))
    if matrix.no_peer_access:
        console.print("* no peer access: copies go through host memory")


def _print_grid(grid: Grid, console: Console) -> None:
    header, rows, folded = fold_constant_columns(grid)
    console.print()
    console.print(Text(" · ".join([grid.title, *folded]), style="italic"))
    columns = [
        _Column(name, justify="left" if i == 0 else "right") for i, name in enumerate(header)
    ]
    console.print(_table(columns, rows, width=console.width))


def fold_constant_columns(
    grid: Grid,
) -> tuple[tuple[str, ...], list[tuple[str, ...]], list[str]]:
    """The grid's header and rows without the :attr:`Grid.fold` columns that hold one value on
    every row, and those as ``name value`` for the title."""
    constant = [
        i
        for i, name in enumerate(grid.header)
        if name in grid.fold and len({row[i] for row in grid.rows if i < len(row)}) == 1
    ]
    folded = [f"{grid.header[i]} {grid.rows[0][i]}" for i in constant]
    keep = [i for i in range(len(grid.header)) if i not in constant]
    rows = [tuple(row[i] for i in keep if i < len(row)) for row in grid.rows]
    return tuple(grid.header[i] for i in keep), rows, folded


def severity_counts(findings: Iterable[Finding]) -> str:
    """'2 fail, 1 info': how many findings of each severity, most severe first ('' if none)."""
    findings = list(findings)
    counts = {s: sum(f.severity == s for f in findings) for s in SEVERITY_STYLE}
    return ", ".join(f"{n} {s}" for s, n in counts.items() if n)


def _print_findings(results: Results, console: Console, *, verbose: bool) -> None:
    act_on, notes = findings_and_notes(results.findings)
    none = "No findings to act on." if notes else "No findings."
    print_findings(act_on, console, title="Findings", none=none)
    if notes and verbose:
        print_findings(notes, console, title="Notes", none="")
    elif notes:
        n, s = len(notes), "s" if len(notes) != 1 else ""
        text = f"{n} note{s} that need{'' if s else 's'} no action: in summary.md and report.html"
        console.print(Text(f"{text} (--verbose prints them)", style="dim"))


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


def print_advice(run: RunAnalysis, console: Console) -> None:
    """The top :data:`ADVICE_SHOWN` changes, each with its gain, basis and source; or the
    sentence that none beat the defaults; nothing when the run compared no settings."""
    advice = advice_table(run.results, run.advice)
    if not advice.shown:
        return
    if not advice.rows:
        console.print(Text(f"{ADVICE_TITLE}: ", style="bold") + Text(advice.empty))
        return
    total = len(advice.rows)
    count = (
        f"top {ADVICE_SHOWN} of {total} by gain; all in summary.md"
        if total > ADVICE_SHOWN
        else f"{total} by gain"
    )
    console.print(Text(f"{ADVICE_TITLE}: ", style="bold") + Text(count))
    for n, change, gain, basis, _evidence, source in advice.rows[:ADVICE_SHOWN]:
        console.print(Text(f"{n:>2}. ", style="bold") + Text(change, style="green"))
        console.print(Text(f"    {gain} · {basis} · {source}"))


def _print_drain(run: RunAnalysis, console: Console) -> None:
    """The drain list after the node-pair tests (:mod:`.drain`): its headline in bold, each
    entry with its evidence and commands."""
    head, *rest = drain_lines(run.drain) or [""]
    if head:
        console.print(Text(head, style="bold"), soft_wrap=True)
    for line in rest:
        console.print(Text(line), soft_wrap=True)


def _print_errors(results: Results, console: Console) -> None:
    for err in results.errors:
        where = error_where(err)
        line = Text("ERROR", style="bold red") + Text(f" {where}: " if where else " ")
        console.print(line + Text(err.message))


def _print_unfinished(results: Results, console: Console) -> None:
    run = results.run
    if run.unfinished:
        console.print(Text("Did not finish: ", style="bold red") + Text(", ".join(run.unfinished)))
    for name, why in run.skipped.items():
        console.print(Text("Skipped: ", style="bold") + Text(f"{name}: {why}"))
