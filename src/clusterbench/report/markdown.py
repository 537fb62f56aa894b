"""summary.md: the console summary's content as GitHub-flavoured markdown, headed by what to
change (:mod:`.advice`)."""

from __future__ import annotations

from collections.abc import Sequence

from clusterbench.analyses.run import RunAnalysis
from clusterbench.report.advice import ADVICE_HEADER, ADVICE_TITLE, advice_table
from clusterbench.report.drain import drain_markdown
from clusterbench.report.timing import phase_line, time_line
from clusterbench.report.verdict import verdict_lines
from clusterbench.schema import ErrorRecord, Finding, Results
from clusterbench.units import format_seconds
from clusterbench.views.cells import (
    Grid,
    Matrix,
    Section,
    findings_and_notes,
    header_line,
    matrix_cell,
    matrix_title,
    row_cells,
    row_header,
)

__all__ = ["render_markdown"]


def render_markdown(run: RunAnalysis) -> str:
    """Header, the verdict per node, what to change, one table per benchmark section,
    findings, the drain list (after node-pair tests), errors, and what did not finish."""
    results, sections = run.results, run.sections
    parts = [f"# clusterbench run {results.run.id}", header_line(results)]
    verdict = verdict_lines(run)
    if verdict:
        parts.append("## Verdict\n\n" + "\n".join(f"- {line.text}" for line in verdict))
    advice = _advice(run)
    if advice:
        parts.append(advice)
    if not sections:
        parts.append("No measurements.")
    parts.extend(_section(s) for s in sections)
    if results.run.benchmark_seconds:
        parts.append(_time(results))
    parts.append(_findings(results))
    drain = drain_markdown(run.drain)
    if drain:
        parts.append(drain)
    if results.errors:
        parts.append("## Errors\n\n" + "\n".join(_error(e) for e in results.errors))
    unfinished = _unfinished(results)
    if unfinished:
        parts.append(unfinished)
    return "\n\n".join(parts) + "\n"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows),
    ]
    return "\n".join(lines)


def _advice(run: RunAnalysis) -> str:
    """The ranked advice as a table (the change as code), its sentence, or '' (left out)."""
    results = run.results
    advice = advice_table(results, run.advice)
    if not advice.shown:
        return ""
    if not advice.rows:
        return f"## {ADVICE_TITLE}\n\n{advice.empty}"
    rows = [(n, f"`{change}`", *rest) for n, change, *rest in advice.rows]
    return f"## {ADVICE_TITLE}\n\n" + _table(ADVICE_HEADER, rows)


def _section(section: Section) -> str:
    parts = [f"## {section.benchmark}"]
    if section.rows:
        parts.append(_table(row_header(section.rows), [row_cells(r) for r in section.rows]))
    parts.extend(_matrix(m) for m in section.matrices)
    parts.extend(_grid(g) for g in section.grids)
    return "\n\n".join(parts)


def _matrix(matrix: Matrix) -> str:
    rows = [
        (src, *(matrix_cell(matrix, src, dst) for dst in matrix.devices)) for src in matrix.devices
    ]
    text = f"**{matrix_title(matrix)}**\n\n" + _table((matrix.corner, *matrix.devices), rows)
    if matrix.no_peer_access:
        text += "\n\n\\* no peer access: copies go through host memory"
    return text


def _grid(grid: Grid) -> str:
    return f"**{_cell(grid.title)}**\n\n" + _table(grid.header, grid.rows)


def _time(results: Results) -> str:
    """Each benchmark's wall time (its slowest rank's), the one-line summary under it."""
    rows = [(name, format_seconds(s)) for name, s in results.run.benchmark_seconds.items()]
    text = "## Time\n\n" + _table(("benchmark", "wall time"), rows) + f"\n\n{time_line(results)}"
    phases = phase_line(results)
    return f"{text}\n\n{phases}" if phases else text


def _findings(results: Results) -> str:
    """The findings to act on, then the notes (info: no action needed) in a part of their own."""
    act_on, notes = findings_and_notes(results.findings)
    none = "No findings to act on." if notes else "No findings."
    parts = ["## Findings\n\n" + (_findings_table(act_on) if act_on else none)]
    if notes:
        parts.append("## Notes\n\nNothing to act on.\n\n" + _findings_table(notes))
    return "\n\n".join(parts)


def _findings_table(findings: Sequence[Finding]) -> str:
    rows = [(f.severity.upper(), f.scope, f.message, f.fix) for f in findings]
    return _table(("severity", "scope", "message", "fix"), rows)


def _error(err: ErrorRecord) -> str:
    where = [
        err.benchmark or "",
        f"rank {err.rank}" if err.rank is not None else "",
        err.host or "",
    ]
    label = " ".join(w for w in where if w)
    return f"- **{label}**: {err.message}" if label else f"- {err.message}"


def _unfinished(results: Results) -> str:
    lines = []
    if results.run.unfinished:
        lines.append(f"- did not finish: {', '.join(results.run.unfinished)}")
    lines.extend(f"- skipped {name}: {why}" for name, why in results.run.skipped.items())
    return "## Not finished\n\n" + "\n".join(lines) if lines else ""
