"""The attribution part of the summary: one row per rank, where its step time goes; and, with
the accumulation sweep, one row per accumulation count, the idle and wait per iteration."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable

from clusterbench.benchmarks.attribution import ACCUM_MIN_RISE_PCT, AttributionMetrics
from clusterbench.benchmarks.attribution.accum import (
    PAPER_IDLE_PCT,
    PAPER_STEPS_WORD,
    accum_curve,
    accum_statement,
)
from clusterbench.schema import Measurement
from clusterbench.views.cells import Grid, Section, format_value, metric_cell, where

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
        # the per-step rows stay in the JSON; the sweep has its own table
        if (m.params.get("rank_step", "mean") == "mean" and "accum_steps" not in m.params
                and "kernel" not in m.params):  # fmt: skip
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
    grids = [Grid(title=title, header=_HEADER, rows=rows)]
    kernels = _kernel_grid(ms)
    if kernels is not None:
        grids.append(kernels)
    accum = _accum_grid(ms)
    if accum is not None:
        grids = [*grids, accum] if rows else [accum]
    return Section("attribution", grids=grids)


_KERNEL_ROWS = 10
_KERNEL_NAME = 64


def _kernel_grid(ms: list[Measurement]) -> Grid | None:
    """The top kernels by device time (``clusterbench analyze``): per kernel and class, its
    mean time per rank over the ranks that ran it, and its median share of the steps."""
    by_kernel: dict[tuple[str, str], list[Measurement]] = defaultdict(list)
    for m in _A.kernel_time_ms.select(ms):
        by_kernel[(str(m.params.get("kernel")), str(m.params.get("class")))].append(m)
    if not by_kernel:
        return None
    ranked = sorted(by_kernel.items(), key=lambda kv: -statistics.fmean(m.value for m in kv[1]))
    rows: list[tuple[str, ...]] = []
    for (name, kind), found in ranked[:_KERNEL_ROWS]:
        short = name if len(name) <= _KERNEL_NAME else name[: _KERNEL_NAME - 1] + "…"
        shares = [float(str(m.params.get("share_pct") or 0.0)) for m in found]
        calls = sum(int(str(m.params.get("calls") or 0)) for m in found)
        rows.append((short, kind, format_value(statistics.fmean(m.value for m in found)),
                     format_value(statistics.median(shares)), str(len(found)),
                     str(calls)))  # fmt: skip
    title = (
        f"top kernels by device time in the profiled steps (of {len(by_kernel)} in the ranks' "
        "top lists): ms per rank (mean over the ranks that ran it), share of the step time "
        "(median), ranks, calls"
    )
    return Grid(title=title, header=("kernel", "class", "ms", "share %", "ranks", "calls"),
                rows=rows)  # fmt: skip


_ACCUM_HEADER = ("steps", "idle %", "wait %", "idle+wait %", "vs 1–4", "idle ms", "wait ms", "n")
_ACCUM_TITLE = (
    "attribution, accumulation sweep: coordination idle per iteration (one optimizer step of "
    "k micro-steps), median over ranks; idle: no device activity, wait: inside collectives "
    "until the latest rank starts them; idle+wait: median of every rank's every iteration (n "
    "of them); vs 1–4: its rise over 1–4 steps in points, ± the half-width of its 95% "
    f"bootstrap interval (the paper: up to {PAPER_IDLE_PCT}% past {PAPER_STEPS_WORD} steps)"
)


def _accum_grid(ms: list[Measurement]) -> Grid | None:
    points = accum_curve(ms)
    if not points:
        return None
    statement = accum_statement(points, min_rise_pct=ACCUM_MIN_RISE_PCT)
    rises = {r.accum_steps: r for r in statement.above} if statement is not None else {}
    mean_ms: dict[tuple[str, int], list[float]] = defaultdict(list)
    for m in [*_A.idle_ms.select(ms), *_A.collective_wait_ms.select(ms)]:
        k = m.params.get("accum_steps")
        if m.params.get("rank_step") == "mean" and isinstance(k, int):
            mean_ms[(m.metric, k)].append(m.value)
    rows: list[tuple[str, ...]] = []
    for p in points:
        rise = rises.get(p.accum_steps)
        rows.append((
            str(p.accum_steps), _median(m.value for m in p.idle.values()),
            _median(m.value for m in p.wait.values()), _median(p.samples),
            f"{rise.rise_points:+.1f} ±{rise.noise_points:.1f}" if rise is not None else "-",
            _median(mean_ms[(_A.idle_ms.name, p.accum_steps)]),
            _median(mean_ms[(_A.collective_wait_ms.name, p.accum_steps)]), str(len(p.samples)),
        ))  # fmt: skip
    return Grid(title=_ACCUM_TITLE, header=_ACCUM_HEADER, rows=rows)


def _median(values: Iterable[float]) -> str:
    listed = list(values)
    return format_value(statistics.median(listed)) if listed else "-"
