"""The transfer section: host<->device bandwidth per direction, memory and NUMA placement, the
PCIe link under load, and GPU->GPU copy matrices."""

from __future__ import annotations

import statistics
from collections import defaultdict

from clusterbench.benchmarks.transfer import TransferMetrics
from clusterbench.judging.measurements import dev_label
from clusterbench.schema import Measurement
from clusterbench.views.cells import Matrix, Section, metric_rows, param

__all__ = ["best_p2p", "section"]


def _transfer_label(m: Measurement) -> str | None:
    if TransferMetrics.bandwidth.matches(m):
        return f"{param(m, 'direction')} {param(m, 'memory')}, NUMA {param(m, 'numa')}"
    return None


def _max_link(m: Measurement) -> tuple[float, str] | None:
    maximum = param(m, "max_gen" if TransferMetrics.pcie_link_gen.matches(m) else "max_width")
    return (float(maximum), "max") if isinstance(maximum, int | float) else None


def section(ms: list[Measurement], multi_host: bool) -> Section:
    rows = metric_rows(ms, label=_transfer_label, multi_host=multi_host)
    link_names = {
        TransferMetrics.pcie_link_gen.name: "PCIe link gen under load",
        TransferMetrics.pcie_link_width.name: "PCIe link width under load",
    }
    rows += metric_rows(
        ms, label=lambda m: link_names.get(m.metric), multi_host=multi_host, reference=_max_link
    )
    pairs = TransferMetrics.p2p_bandwidth.select(ms)
    matrices = [_p2p_matrix(pairs, mode=mode) for mode in ("oneway", "bidir")]
    return Section("transfer", rows=rows, matrices=[mx for mx in matrices if mx.cells])


def best_p2p(pairs: list[Measurement], *, mode: str) -> dict[tuple[str, str, str], Measurement]:
    """(host, source, destination) -> the pair's GPU->GPU copy of ``mode`` at its best size."""
    best: dict[tuple[str, str, str], Measurement] = {}
    for m in pairs:
        if param(m, "mode") != mode:
            continue
        key = (m.host, dev_label(param(m, "src")), dev_label(param(m, "dst")))
        if key not in best or m.value > best[key].value:
            best[key] = m
    return best


def _p2p_matrix(pairs: list[Measurement], *, mode: str) -> Matrix:
    """Best over sizes per host and pair; the median over hosts in each cell."""
    best = best_p2p(pairs, mode=mode)
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
            (src, dst) for (_, src, dst), m in best.items() if param(m, "p2p_access") is False
        ),
        reference=max(refs) if refs else None,
    )
