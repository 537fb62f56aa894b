"""What the summary shows, as plain data: the console and markdown renderers lay it out.

Each row puts the achieved figure next to its limit (spec peak, link rate, maximum link gen),
the way gpt-fast prints achieved bandwidth next to the hardware's.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from clusterbench.analysis.outliers import better_direction
from clusterbench.schema import SEVERITY_ORDER, Finding, Measurement, ParamValue, Results
from clusterbench.units import format_bytes

__all__ = [
    "ROW_HEADER",
    "Extreme",
    "Grid",
    "Matrix",
    "Row",
    "Section",
    "format_bytes",
    "format_value",
    "header_line",
    "matrix_cell",
    "matrix_title",
    "metric_cell",
    "row_cells",
    "sorted_findings",
    "summary_sections",
    "where",
]

_MISSING = "-"
_COUNT_UNITS = frozenset({"gen", "lanes"})
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
    median: float
    low: Extreme
    high: Extreme
    reference: float | None = None
    reference_kind: str | None = None

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
    """Compact, without the unit: 4,273 · 793.2 · 55.4 · 0.0123 · 4 (a PCIe gen)."""
    if value is None:
        return _MISSING
    if unit in _COUNT_UNITS:
        return f"{value:g}"
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
        row.what,
        row.unit,
        str(row.num_devices),
        format_value(row.median, row.unit),
        extreme(row.low),
        extreme(row.high),
        reference,
        _MISSING if fraction is None else f"{fraction:.0%}",
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


def summary_sections(results: Results) -> list[Section]:
    """One section per benchmark, in the order the run measured them."""
    by_benchmark: dict[str, list[Measurement]] = defaultdict(list)
    for m in results.measurements:
        by_benchmark[m.benchmark].append(m)
    multi_host = len({m.host for m in results.measurements}) > 1
    sections = []
    for benchmark, ms in by_benchmark.items():
        builder = _BUILDERS.get(benchmark, _generic_section)
        section = builder(ms, multi_host)
        section.benchmark = benchmark
        sections.append(section)
    return sections


# --- rows ----------------------------------------------------------------------------------

LabelFn = Callable[[Measurement], str | None]
ReferenceFn = Callable[[Measurement], tuple[float, str] | None]


def _spec_reference(m: Measurement) -> tuple[float, str] | None:
    return (m.reference.value, m.reference.kind) if m.reference else None


def _rows(
    ms: Iterable[Measurement],
    *,
    label: LabelFn,
    multi_host: bool,
    reference: ReferenceFn = _spec_reference,
) -> list[Row]:
    """One row per label; a device's best value over sizes when it has several."""
    groups: dict[str, list[Measurement]] = defaultdict(list)
    for m in ms:
        text = label(m)
        if text is not None:
            groups[text].append(m)
    return [
        _row(text, group, multi_host=multi_host, reference=reference)
        for text, group in groups.items()
    ]


def _row(text: str, group: list[Measurement], *, multi_host: bool, reference: ReferenceFn) -> Row:
    lower_is_better = better_direction(group[0].unit) == "lower"
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
        what=text + _size_note(group),
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


def metric_cell(metrics: dict[str, Measurement], *names: str) -> str:
    """The first of ``names`` present in ``metrics``, formatted with its unit; '-' if none."""
    for name in names:
        if name in metrics:
            return format_value(metrics[name].value, metrics[name].unit)
    return "-"


def _size_note(group: list[Measurement]) -> str:
    sizes = sorted({s for m in group if isinstance(s := m.params.get("size_bytes"), int)})
    if not sizes:
        return ""
    if len(sizes) == 1:
        return f", {format_bytes(sizes[0])}"
    return f", best of {format_bytes(sizes[0])}–{format_bytes(sizes[-1])}"


def _param(m: Measurement, key: str) -> ParamValue:
    return m.params.get(key)


# --- sections per benchmark ----------------------------------------------------------------


def _gemm_label(m: Measurement) -> str | None:
    dtype = _param(m, "dtype")
    if m.metric == "tflops_best":
        return f"{dtype} best shape"
    if m.metric == "tflops_geomean":
        return f"{dtype} geomean of {_param(m, 'num_shapes')} shapes"
    if m.metric == "rel_error":
        return f"{dtype} rel. error (tol {_param(m, 'tolerance')})"
    return None  # per-shape figures: too many for a summary; results.json has them


def _gemm_section(ms: list[Measurement], multi_host: bool) -> Section:
    return Section("gemm", rows=_rows(ms, label=_gemm_label, multi_host=multi_host))


def _memory_section(ms: list[Measurement], multi_host: bool) -> Section:
    def label(m: Measurement) -> str | None:
        return f"{_param(m, 'op')}" if m.metric == "bandwidth" else m.metric

    return Section("memory", rows=_rows(ms, label=label, multi_host=multi_host))


def _transfer_label(m: Measurement) -> str | None:
    if m.metric == "bandwidth":
        return f"{_param(m, 'direction')} {_param(m, 'memory')}, NUMA {_param(m, 'numa')}"
    return None


def _max_link(m: Measurement) -> tuple[float, str] | None:
    maximum = _param(m, "max_gen" if m.metric == "pcie_link_gen" else "max_width")
    return (float(maximum), "max") if isinstance(maximum, int | float) else None


def _transfer_section(ms: list[Measurement], multi_host: bool) -> Section:
    rows = _rows(ms, label=_transfer_label, multi_host=multi_host)
    link_names = {
        "pcie_link_gen": "PCIe link gen under load",
        "pcie_link_width": "PCIe link width under load",
    }
    rows += _rows(
        ms, label=lambda m: link_names.get(m.metric), multi_host=multi_host, reference=_max_link
    )
    pairs = [m for m in ms if m.metric == "p2p_bandwidth"]
    matrices = [_p2p_matrix(pairs, mode=mode) for mode in ("oneway", "bidir")]
    return Section("transfer", rows=rows, matrices=[mx for mx in matrices if mx.cells])


def _device(value: ParamValue) -> str:
    return f"cuda:{value}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _p2p_matrix(pairs: list[Measurement], *, mode: str) -> Matrix:
    """Best over sizes per host and pair; the median over hosts in each cell."""
    best: dict[tuple[str, str, str], Measurement] = {}
    for m in pairs:
        if _param(m, "mode") != mode:
            continue
        key = (m.host, _device(_param(m, "src")), _device(_param(m, "dst")))
        if key not in best or m.value > best[key].value:
            best[key] = m
    per_pair: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (_, src, dst), m in best.items():
        per_pair[(src, dst)].append(m.value)
    refs = [m.reference.value for m in best.values() if m.reference]
    num_hosts = len({host for host, _, _ in best})
    hosts_note = f", median over {num_hosts} hosts" if num_hosts > 1 else ""
    return Matrix(
        title=f"GPU→GPU copy, {mode} (rows: source, columns: destination){hosts_note}",
        unit="GB/s",
        devices=sorted({d for pair in per_pair for d in pair}),
        cells={pair: statistics.median(values) for pair, values in per_pair.items()},
        no_peer_access=frozenset(
            (src, dst) for (_, src, dst), m in best.items() if _param(m, "p2p_access") is False
        ),
        reference=max(refs) if refs else None,
    )


def _generic_label(m: Measurement) -> str:
    shown = {k: v for k, v in m.params.items() if k != "size_bytes"}
    details = ", ".join(f"{k}={v}" for k, v in shown.items())
    return f"{m.metric} ({details})" if details else m.metric


def _generic_section(ms: list[Measurement], multi_host: bool) -> Section:
    return Section(ms[0].benchmark, rows=_rows(ms, label=_generic_label, multi_host=multi_host))


def _collectives_section(ms: list[Measurement], multi_host: bool) -> Section:
    from clusterbench.report._collectives import (
        collective_grids,
        collective_label,
        node_pair_matrices,
    )

    rows = _rows(ms, label=collective_label, multi_host=multi_host)
    matrices = node_pair_matrices(ms)
    return Section("collectives", rows=rows, matrices=matrices, grids=collective_grids(ms))


def _network_section(ms: list[Measurement], multi_host: bool) -> Section:
    from clusterbench.report._network import network_matrices, network_row_label

    rows = _rows(ms, label=network_row_label, multi_host=multi_host)
    return Section("network", rows=rows, matrices=network_matrices(ms))


def _training_section(ms: list[Measurement], multi_host: bool) -> Section:
    from clusterbench.report._training import training_section

    return training_section(ms, multi_host)


def _attribution_section(ms: list[Measurement], multi_host: bool) -> Section:
    from clusterbench.report._attribution import attribution_section

    return attribution_section(ms, multi_host)


_BUILDERS: dict[str, Callable[[list[Measurement], bool], Section]] = {
    "gemm": _gemm_section,
    "memory": _memory_section,
    "transfer": _transfer_section,
    "collectives": _collectives_section,
    "network": _network_section,
    "training": _training_section,
    "attribution": _attribution_section,
}
