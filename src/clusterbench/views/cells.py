"""The summary's building blocks, as plain data the console and markdown renderers lay out:
rows, matrices, grids and the section that holds them, and the cells they format.

Each row puts the achieved figure next to its limit (spec peak, link rate, maximum link gen),
the way gpt-fast prints achieved bandwidth next to the hardware's.  A benchmark's own section
(``benchmarks/<name>/section.py``) builds its :class:`Section` from these; a benchmark without one
gets :func:`generic_section`.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from clusterbench.metrics import Metric, direction_of
from clusterbench.schema import (
    SEVERITY_ORDER,
    ErrorRecord,
    Finding,
    Measurement,
    ParamValue,
    Results,
)
from clusterbench.units import format_bytes

__all__ = [
    "ROW_HEADER",
    "Extreme",
    "Grid",
    "Matrix",
    "Row",
    "RowsLayout",
    "Section",
    "error_where",
    "findings_and_notes",
    "format_bytes",
    "format_value",
    "generic_section",
    "header_line",
    "matrix_cell",
    "matrix_title",
    "metric_cell",
    "metric_rows",
    "param",
    "row_cells",
    "row_header",
    "rows_layout",
    "sorted_findings",
    "spec_reference",
    "where",
]

_MISSING = "-"
_COUNT_UNITS = frozenset({"count", "gen", "lanes"})
ROW_HEADER = ("what", "unit", "devices", "median", "min", "max", "reference", "% of ref")
_KIND_SHORT = {"spec_peak": "spec", "link_rate": "link", "peer_median": "peers"}


@dataclass(frozen=True, slots=True)
class Extreme:
    value: float
    where: str
    """The device (``host/device`` when the run spans several hosts)."""


@dataclass(frozen=True, slots=True)
class Row:
    what: str
    unit: str
    num_devices: int
    """Devices whose measurements the row holds (median, min and max are over them)."""
    median: float
    low: Extreme
    high: Extreme
    reference: float | None = None
    reference_kind: str | None = None
    size_note: str = ""
    """``, best of 8 B–16 MiB``: the sizes the figures were taken at, after :attr:`what`."""
    num_ranks: int | None = None
    """Ranks in the process group of a collective's row (measured once for the group)."""

    @property
    def count(self) -> tuple[int, str]:
        """How many the row is about: (ranks, "rank") for a collective, else devices."""
        if self.num_ranks is not None:
            return self.num_ranks, "rank"
        return self.num_devices, "device"

    @property
    def fraction_of_reference(self) -> float | None:
        return self.median / self.reference if self.reference else None


@dataclass(frozen=True, slots=True)
class Matrix:
    """Pair figures (GPU to GPU, node to node): sources as rows, destinations as columns."""

    title: str
    unit: str
    devices: list[str]
    """Row and column labels: GPUs, or hosts."""
    cells: dict[tuple[str, str], float]
    no_peer_access: frozenset[tuple[str, str]] = frozenset()
    reference: float | None = None
    """Every cell's limit, shown as a % of it (None: no % shown)."""
    reference_label: str = "spec"
    """What the reference is, in the title: "spec 450.0 GB/s", "link 10.0 Gb/s"."""
    corner: str = "src \\ dst"
    """The top-left header cell, naming what rows and columns are."""


@dataclass(frozen=True, slots=True)
class Grid:
    """A table of ready-made cells, e.g. collective busbw with sizes as rows and ops as columns."""

    title: str
    header: tuple[str, ...]
    rows: list[tuple[str, ...]]
    fold: tuple[str, ...] = ()
    """Columns that, holding one value on every row, a narrow layout may move to the title
    (``model tiny · strategy ddp``)."""
    text_columns: tuple[str, ...] = ()
    """Columns of sentences: never read as a number (a note that starts with one stays text,
    wrapped and left-aligned, not a sortable figure kept on one line)."""


@dataclass(slots=True)
class Section:
    benchmark: str
    rows: list[Row] = field(default_factory=list)
    matrices: list[Matrix] = field(default_factory=list)
    grids: list[Grid] = field(default_factory=list)


def header_line(results: Results) -> str:
    run = results.run
    nodes = "node" if run.num_nodes == 1 else "nodes"
    return (
        f"clusterbench run {run.id} · suite {run.suite} · world size {run.world_size} · "
        f"{run.num_nodes} {nodes} · backend {run.backend} · status {run.status}"
    )


def format_value(value: float | None, unit: str = "") -> str:
    """Compact, without the unit: 4,273 · 793.2 · 55.4 · 0.0123 · 4 (a PCIe gen) · 29 (a
    count: whole, a median of counts may be 2.5)."""
    if value is None:
        return _MISSING
    if unit in _COUNT_UNITS and float(value).is_integer():
        return f"{value:,.0f}"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 1 or value == 0:
        return f"{value:.1f}"
    return f"{value:.3g}"


def row_cells(row: Row) -> tuple[str, ...]:
    """The cells under :data:`ROW_HEADER`; extremes name their device."""

    def extreme(e: Extreme) -> str:
        text = format_value(e.value, row.unit)
        return text if row.num_devices == 1 else f"{text} ({e.where})"

    fraction = row.fraction_of_reference
    reference = (
        _MISSING
        if row.reference is None
        else f"{format_value(row.reference, row.unit)} {_short_kind(row.reference_kind)}".rstrip()
    )
    return (
        row.what + row.size_note,
        row.unit,
        str(row.count[0]),
        format_value(row.median, row.unit),
        extreme(row.low),
        extreme(row.high),
        reference,
        _MISSING if fraction is None else f"{fraction:.0%}",
    )


@dataclass(frozen=True, slots=True)
class RowsLayout:
    """A section's rows laid out without the columns that would say the same on every row."""

    title: str
    """The section's name and what the dropped columns held: ``collectives · 2 ranks``."""
    columns: tuple[int, ...]
    """Indices into :data:`ROW_HEADER` (and :func:`row_cells`) of the columns kept."""
    header: tuple[str, ...]
    """The kept columns' names (the count column names what it counts: devices or ranks)."""
    what_has_size: bool
    """False when the sizes moved to the title: show :attr:`Row.what` without them."""

    def cells(self, row: Row) -> tuple[str, ...]:
        cells = row_cells(row)
        if not self.what_has_size:
            cells = (row.what, *cells[1:])
        return tuple(cells[i] for i in self.columns)


def row_header(rows: Iterable[Row]) -> tuple[str, ...]:
    """:data:`ROW_HEADER`, its count column named ``ranks`` when every row is a collective's."""
    rows = list(rows)
    ranks = bool(rows) and all(row.num_ranks is not None for row in rows)
    return tuple("ranks" if ranks and h == "devices" else h for h in ROW_HEADER)


def rows_layout(section: Section) -> RowsLayout:
    """The count moves to the title when it is the same on every row (``gemm · 8 devices``,
    ``collectives · 2 ranks``), and so do sizes shared by every row; min and max go when each
    row holds one measurement (they are its median), the reference columns when no row has
    one (a CPU run, an unknown SKU)."""
    rows = section.rows
    title = section.benchmark
    keep = list(range(len(ROW_HEADER)))
    header = row_header(rows)
    counts = {row.count for row in rows}
    if len(counts) == 1:
        n, noun = counts.pop()
        title += f" · {n} {noun}{'s' if n != 1 else ''}"
        keep.remove(ROW_HEADER.index("devices"))
    notes = {row.size_note for row in rows}
    shared_note = len(rows) > 1 and len(notes) == 1 and "" not in notes
    if shared_note:
        title += f" · {notes.pop().removeprefix(', ')}"
    if all(row.num_devices == 1 for row in rows):
        keep.remove(ROW_HEADER.index("min"))
        keep.remove(ROW_HEADER.index("max"))
    if all(row.reference is None for row in rows):
        keep = [i for i in keep if i < ROW_HEADER.index("reference")]
    return RowsLayout(
        title=title,
        columns=tuple(keep),
        header=tuple(header[i] for i in keep),
        what_has_size=not shared_note,
    )


def _short_kind(kind: str | None) -> str:
    return _KIND_SHORT.get(kind or "", kind or "")


def matrix_title(matrix: Matrix) -> str:
    ref = matrix.reference
    limit = f"; {matrix.reference_label} {format_value(ref)} {matrix.unit}" if ref else ""
    return f"{matrix.title}, {matrix.unit}{limit}"


def matrix_cell(matrix: Matrix, src: str, dst: str) -> str:
    """Value, ``*`` without peer access, and % of the reference when known."""
    value = matrix.cells.get((src, dst))
    if value is None:
        return _MISSING
    mark = "*" if (src, dst) in matrix.no_peer_access else ""
    if matrix.reference:
        return f"{format_value(value)}{mark} ({value / matrix.reference:.0%})"
    return f"{format_value(value)}{mark}"


def sorted_findings(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: SEVERITY_ORDER[f.severity])


def findings_and_notes(findings: Iterable[Finding]) -> tuple[list[Finding], list[Finding]]:
    """The findings to act on (fail, warn), most severe first, and the notes (info): what
    needs no action, shown apart (summary.md's and report.html's Notes, ``--verbose``)."""
    ordered = sorted_findings(findings)
    return [f for f in ordered if f.severity != "info"], [
        f for f in ordered if f.severity == "info"
    ]


# --- rows ----------------------------------------------------------------------------------

LabelFn = Callable[[Measurement], str | None]
ReferenceFn = Callable[[Measurement], tuple[float, str] | None]


def spec_reference(m: Measurement) -> tuple[float, str] | None:
    return (m.reference.value, m.reference.kind) if m.reference else None


def metric_rows(
    ms: Iterable[Measurement],
    *,
    label: LabelFn,
    multi_host: bool,
    reference: ReferenceFn = spec_reference,
    group_ranks: bool = False,
) -> list[Row]:
    """One row per label; a device's best value over sizes when it has several.
    ``group_ranks``: the rows are collectives, each counting the ranks of its process group
    (the ``group_size`` param) rather than the devices that recorded it."""
    groups: dict[str, list[Measurement]] = defaultdict(list)
    for m in ms:
        text = label(m)
        if text is not None:
            groups[text].append(m)
    return [
        _row(text, group, multi_host=multi_host, reference=reference, group_ranks=group_ranks)
        for text, group in groups.items()
    ]


def _group_ranks(group: list[Measurement]) -> int | None:
    sizes = [s for m in group if isinstance(s := m.params.get("group_size"), int)]
    return max(sizes) if sizes else None


def _row(
    text: str,
    group: list[Measurement],
    *,
    multi_host: bool,
    reference: ReferenceFn,
    group_ranks: bool = False,
) -> Row:
    lower_is_better = direction_of(group[0]) == "lower"
    best: dict[tuple[str, str], Measurement] = {}
    for m in group:
        held = best.get((m.host, m.device))
        if held is None or (m.value < held.value if lower_is_better else m.value > held.value):
            best[(m.host, m.device)] = m
    chosen = list(best.values())
    low = min(chosen, key=lambda m: m.value)
    high = max(chosen, key=lambda m: m.value)
    refs = [r for r in map(reference, chosen) if r is not None]
    return Row(
        what=text,
        size_note=_size_note(group),
        num_ranks=_group_ranks(group) if group_ranks else None,
        unit=group[0].unit,
        num_devices=len(chosen),
        median=statistics.median(m.value for m in chosen),
        low=Extreme(low.value, where(low, multi_host)),
        high=Extreme(high.value, where(high, multi_host)),
        reference=statistics.median(r[0] for r in refs) if refs else None,
        reference_kind=refs[0][1] if refs else None,
    )


def where(m: Measurement, multi_host: bool) -> str:
    """The device a row is about, with its host when the run has several."""
    return f"{m.host}/{m.device}" if multi_host else m.device


def metric_cell(metrics: dict[str, Measurement], *declared: Metric) -> str:
    """The first of ``declared`` present in ``metrics`` (metric name -> measurement), formatted
    with its unit; '-' if none."""
    for metric in declared:
        if metric.name in metrics:
            m = metrics[metric.name]
            return format_value(m.value, m.unit)
    return "-"


def _size_note(group: list[Measurement]) -> str:
    sizes = sorted({s for m in group if isinstance(s := m.params.get("size_bytes"), int)})
    if not sizes:
        return ""
    if len(sizes) == 1:
        return f", {format_bytes(sizes[0])}"
    return f", best of {format_bytes(sizes[0])}–{format_bytes(sizes[-1])}"


def param(m: Measurement, key: str) -> ParamValue:
    return m.params.get(key)


def _generic_label(m: Measurement) -> str:
    shown = {k: v for k, v in m.params.items() if k != "size_bytes"}
    details = ", ".join(f"{k}={v}" for k, v in shown.items())
    return f"{m.metric} ({details})" if details else m.metric


def generic_section(ms: list[Measurement], multi_host: bool) -> Section:
    return Section(
        ms[0].benchmark, rows=metric_rows(ms, label=_generic_label, multi_host=multi_host)
    )


def error_where(err: ErrorRecord) -> str:
    """Where an error happened: ``gemm rank 3 host node7`` (the parts known), or ''."""
    parts = (
        err.benchmark,
        f"rank {err.rank}" if err.rank is not None else None,
        f"host {err.host}" if err.host else None,
    )
    return " ".join(part for part in parts if part)
