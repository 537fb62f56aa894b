"""The placement part of the summary: where each rank ran (node, GPU, NUMA nodes, CPUs,
nearest NIC, NVLink domain), from doctor's facts; one row per node past a few nodes' worth."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from clusterbench.analyses.placement.facts import RankPlacement, ranks_text
from clusterbench.schema import Results
from clusterbench.views.cells import Grid, Section

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = ["MAX_RANK_ROWS", "section"]

MAX_RANK_ROWS = 16
"""Up to this many ranks a row each; beyond, one row per node."""
_HEADER = ("rank", "host", "local", "GPU", "GPU NUMA", "CPUs", "CPU NUMA", "NIC (NUMA)", "NVLink")
_MISSING = "-"


def _text(value: object) -> str:
    return _MISSING if value is None else str(value)


def _nic(p: RankPlacement) -> str:
    if p.nic is None:
        return _MISSING
    return f"{p.nic} ({_text(p.nic_numa_node)})"


def _numbers(values: Iterable[int | None]) -> str:
    known = sorted({v for v in values if v is not None})
    return ranks_text(known) if known else _MISSING


def _domain(p: RankPlacement) -> str:
    return ranks_text(p.nvlink_domain) if p.nvlink_domain else _MISSING


def _rank_row(p: RankPlacement) -> tuple[str, ...]:
    return (str(p.rank), p.host, str(p.local_rank), _text(p.gpu), _text(p.gpu_numa_node),
            p.cpus or _MISSING, _numbers(p.cpu_numa_nodes), _nic(p), _domain(p))  # fmt: skip


def _node_row(ps: Sequence[RankPlacement]) -> tuple[str, ...]:
    nics = sorted({_nic(p) for p in ps})
    domains = sorted({_domain(p) for p in ps})
    return (
        ranks_text(p.rank for p in ps),
        ps[0].host,
        ranks_text(p.local_rank for p in ps),
        _numbers(p.gpu for p in ps),
        _numbers(p.gpu_numa_node for p in ps),
        " ".join(sorted({p.cpus for p in ps if p.cpus})) or _MISSING,
        _numbers(n for p in ps for n in p.cpu_numa_nodes),
        ", ".join(nics),
        " / ".join(domains),
    )


def section(results: Results, run: RunView) -> Section | None:
    """The placement table of the run; None without doctor's facts."""
    ranks: list[RankPlacement] = run.part("placement")
    if not ranks:
        return None
    if len(ranks) <= MAX_RANK_ROWS:
        rows = [_rank_row(p) for p in ranks]
        title = "placement: where each rank ran"
    else:
        nodes = sorted({p.node for p in ranks})
        rows = [_node_row([p for p in ranks if p.node == n]) for n in nodes]
        title = "placement: where each node's ranks ran"
    return Section("placement", grids=[Grid(title=title, header=_HEADER, rows=rows)])
