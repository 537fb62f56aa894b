"""HTML tables of the report: a section's rows, matrices and grids, and the findings, each
sortable by a click on its header.

Every cell that holds a number carries it in ``data-v`` (the value itself, not its formatted
text), which the page's sort script compares; all text is escaped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from html import escape

from clusterbench.schema import SEVERITY_ORDER, Finding
from clusterbench.views.cells import (
    Grid,
    Matrix,
    Row,
    Section,
    matrix_cell,
    matrix_title,
    row_cells,
    rows_layout,
    sorted_findings,
)

__all__ = [
    "Cell",
    "findings_table",
    "grid_table",
    "matrix_table",
    "number_in",
    "rows_table",
    "section_blocks",
    "table",
    "table_of",
]

Cell = str | tuple[str, float | None] | tuple[str, float | None, str]
"""A cell's text; or its text and the number it sorts by; or those and a CSS class."""

_LONG_TABLE_ROWS = 40
_NUMBER = re.compile(r"^[<>~≈+]?\s*(-?[\d,]*\.?\d+(?:[eE][-+]?\d+)?)\s*([A-Za-z%µ]*)")
_SCALE = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "%": 0.01}


def number_in(text: str) -> float | None:
    """The number a formatted cell starts with, in base units for sizes ('2 MiB' -> 2097152,
    '1,017' -> 1017, '42%' -> 0.42, '12.5 (cpu:1)' -> 12.5); None when it holds none."""
    match = _NUMBER.match(text.strip())
    if match is None:
        return None
    try:
        value = float(match.group(1).replace(",", ""))
    except ValueError:
        return None
    return value * _SCALE.get(match.group(2), 1)


def _td(cell: Cell) -> str:
    if isinstance(cell, str):
        return f"<td>{escape(cell)}</td>"
    text, key = cell[0], cell[1]
    css = f' class="{escape(cell[2])}"' if len(cell) == 3 else ""
    value = f' data-v="{key!r}"' if key is not None and math.isfinite(key) else ""
    return f"<td{css}{value}>{escape(text)}</td>"


def table(
    header: Sequence[str],
    rows: Iterable[Sequence[Cell]],
    *,
    title: str | None = None,
    row_classes: Sequence[str] | None = None,
    note: str | None = None,
) -> str:
    """A sortable table; ``row_classes``: one CSS class per row (a severity, a verdict)."""
    body = []
    for n, row in enumerate(rows):
        css = f' class="{escape(row_classes[n])}"' if row_classes and row_classes[n] else ""
        body.append(f"<tr{css}>" + "".join(_td(c) for c in row) + "</tr>")
    head = "".join(f'<th scope="col">{escape(h)}</th>' for h in header)
    long = " long" if len(body) > _LONG_TABLE_ROWS else ""
    parts = [f'<p class="tbl-title">{escape(title)}</p>'] if title else []
    parts.append(
        f'<div class="tbl{long}"><table class="sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )
    if note:
        parts.append(f'<p class="dim">{escape(note)}</p>')
    return "".join(parts)


def rows_table(section: Section) -> str:
    """The section's rows laid out as the console lays them out (:func:`cells.rows_layout`:
    the same title, columns and header), each number sortable by its value."""
    layout = rows_layout(section)
    cells = []
    for r in section.rows:
        row = _row_cells(r)
        if not layout.what_has_size:
            row[0] = r.what
        cells.append(row)
    return table(
        list(layout.header), ([row[i] for i in layout.columns] for row in cells), title=layout.title
    )


def _row_cells(row: Row) -> list[Cell]:
    what, unit, devices, median, low, high, reference, fraction = row_cells(row)
    return [
        what,
        unit,
        (devices, row.count[0]),
        (median, row.median),
        (low, row.low.value),
        (high, row.high.value),
        (reference, row.reference),
        (fraction, row.fraction_of_reference),
    ]


def matrix_table(matrix: Matrix) -> str:
    rows: list[list[Cell]] = [
        [
            src,
            *(
                (matrix_cell(matrix, src, dst), matrix.cells.get((src, dst)))
                for dst in matrix.devices
            ),
        ]
        for src in matrix.devices
    ]
    note = "* no peer access: copies go through host memory" if matrix.no_peer_access else None
    return table([matrix.corner, *matrix.devices], rows, title=matrix_title(matrix), note=note)


def grid_table(grid: Grid) -> str:
    text = {i for i, name in enumerate(grid.header) if name in grid.text_columns}
    rows: list[list[Cell]] = [
        [t if i in text else (t, number_in(t)) for i, t in enumerate(row)] for row in grid.rows
    ]
    return table(grid.header, rows, title=grid.title)


def table_of(block: Grid | Matrix) -> str:
    return matrix_table(block) if isinstance(block, Matrix) else grid_table(block)


def section_blocks(
    section: Section, *, shown: Sequence[Grid | Matrix] = ()
) -> list[tuple[Grid | Matrix | None, str]]:
    """The section's tables (rows, then matrices, then grids), less those in ``shown`` (drawn
    beside a plot already), each with the block it shows (None: the section's rows)."""
    parts: list[tuple[Grid | Matrix | None, str]] = (
        [(None, rows_table(section))] if section.rows else []
    )
    parts += [(m, matrix_table(m)) for m in section.matrices if not any(m == s for s in shown)]
    parts += [(g, grid_table(g)) for g in section.grids if not any(g == s for s in shown)]
    return parts


def findings_table(findings: Iterable[Finding]) -> str:
    ordered = sorted_findings(findings)
    rows: list[list[Cell]] = [
        [(f.severity, float(SEVERITY_ORDER[f.severity]), "sev"), f.scope, f.message, f.fix]
        for f in ordered
    ]
    classes = [f"sev-{f.severity}" for f in ordered]
    return table(("severity", "scope", "finding", "fix"), rows, row_classes=classes)
