"""The attribution part of the summary: one row per rank, where its step time goes."""

from __future__ import annotations

import statistics
from collections import defaultdict

from clusterbench.benchmarks.attribution import AttributionMetrics
from clusterbench.report.cells import Grid, Section, format_value, metric_cell, where
from clusterbench.schema import Measurement

__all__ = ["section"]

# Short names, so that the table fits 80 columns; the title says what they mean.
_HEADER = (
    "rank", "device", "step ms", "compute", "memory", "comm.", "overlap", "coord.", "late ms",
)  # fmt: skip
_A = AttributionMetrics
_METRICS = (
    _A.step_time_ms, _A.compute, _A.memory, _A.communication, _A.communication_overlapped,
    _A.coordination, _A.collective_start_lateness_ms,
)  # fmt: skip
_TITLE = (
    "attribution: where each rank's step time goes, % of the step (mean over the profiled "
    "steps); comm.: exposed communication, overlap: hidden under compute, coord.: device "
    "idle (launch gaps, waiting for input or ranks), late: collective start lateness"
)


def section(ms: list[Measurement], multi_host: bool) -> Section:
    by_rank: dict[int, dict[str, Measurement]] = defaultdict(dict)
    for m in ms:
        if m.params.get("rank_step", "mean") == "mean":  # the per-step rows stay in the JSON
            by_rank[m.rank][m.metric] = m
    rows = []
    for rank, metrics in sorted(by_rank.items()):
        first = next(iter(metrics.values()))
        cells = (metric_cell(metrics, metric) for metric in _METRICS)
        rows.append((str(rank), where(first, multi_host), *cells))
    title = _TITLE
    spread = next(iter(_A.collective_start_spread_ms.select(ms)), None)
    if spread is not None:
        title += f"; collective start spread {format_value(spread.value)} ms (median)"
    overhead = [m[_A.profiler_overhead_pct.name].value for m in by_rank.values()
                if _A.profiler_overhead_pct.name in m]  # fmt: skip
    if overhead:
        title += (f"; the profiler slowed steps by {format_value(statistics.median(overhead))}% "
                  f"(median over ranks, at most {format_value(max(overhead))}%)")  # fmt: skip
    return Section("attribution", grids=[Grid(title=title, header=_HEADER, rows=rows)])
