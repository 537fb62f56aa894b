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
from clusterbench.benchmarks.attribution.stragglers import find_straggler
from clusterbench.benchmarks.attribution.thresholds import AttributionThresholds
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
                and "kernel" not in m.params and "whatif" not in m.params):  # fmt: skip
            by_rank[m.rank][m.metric] = m
    # kernels the table of families does not know: a column only where a trace has them
    unknown = any(
        _A.unclassified.name in r and r[_A.unclassified.name].value > 0 for r in by_rank.values()
    )
    metrics_shown = (*_METRICS[:-1], _A.unclassified, _METRICS[-1]) if unknown else _METRICS
    header = (*_HEADER[:-1], "unclass.", _HEADER[-1]) if unknown else _HEADER
    rows = []
    for rank, metrics in sorted(by_rank.items()):
        first = next(iter(metrics.values()))
        cells = (metric_cell(metrics, metric) for metric in metrics_shown)
        rows.append((str(rank), where(first, multi_host), *cells))
    title = _TITLE + ("; unclass.: kernels the table of kernel families does not know"
                      if unknown else "")  # fmt: skip
    spread = next(iter(_A.collective_start_spread_ms.select(ms)), None)
    if spread is not None:
        title += f"; collective start spread {format_value(spread.value)} ms (median)"
    overhead = [m[_A.profiler_overhead_pct.name].value for m in by_rank.values()
                if _A.profiler_overhead_pct.name in m]  # fmt: skip
    if overhead:
        title += (f"; the profiler slowed steps by {format_value(statistics.median(overhead))}% "
                  f"(median over ranks, at most {format_value(max(overhead))}%)")  # fmt: skip
    grids = [Grid(title=title, header=header, rows=rows)]
    gains = _whatif_grid(ms)
    if gains is not None:
        grids.append(gains)
    kernels = _kernel_grid(ms)
    if kernels is not None:
        grids.append(kernels)
    accum = _accum_grid(ms)
    if accum is not None:
        grids = [*grids, accum] if rows else [accum]
    return Section("attribution", grids=grids)


_WHATIFS = {
    "straggler": "the straggler entering its collectives with the others",
    "input_wait": "no wait for input (the DataLoader)",
    "launch_gaps": "the launch gaps closed (CUDA graphs; at most)",
    "exposed_communication": "the exposed communication hidden under compute (at most)",
    "fused_elementwise": "the elementwise kernels fused (torch.compile; at most)",
}


def _whatif_grid(ms: list[Measurement]) -> Grid | None:
    """What each fix would save per step (``clusterbench analyze``'s what-ifs over the
    traces' own timelines): the median rank's saving, the straggler's for the straggler."""
    by_fix: dict[str, dict[int, float]] = defaultdict(dict)
    steps = [m.value for m in _A.step_time_ms.select(ms) if m.params.get("rank_step") == "mean"]
    for m in _A.whatif_saving_ms.select(ms):
        if m.params.get("rank_step", "mean") == "mean":
            by_fix[str(m.params.get("whatif"))][m.rank] = m.value
    if not by_fix or not steps:
        return None
    step_ms = statistics.median(steps)
    # a rank-wide fix counts the median rank without the straggler: its idle is its lateness
    # the straggler as the findings name it (the same rule, not a second one)
    named = find_straggler(ms, min_spread_pct=AttributionThresholds().straggler_min_spread_pct)
    late = named.rank if named is not None else None
    rows: list[tuple[str, ...]] = []
    for fix, label in _WHATIFS.items():
        found = by_fix.get(fix)
        if not found:
            continue
        if fix == "straggler":
            rank = max(found, key=lambda r: found[r])
            value, who = found[rank], f"rank {rank}"
        else:
            values = [v for r, v in found.items() if r != late] or list(found.values())
            value, who = statistics.median(values), "median rank"
        rows.append((label, who, format_value(value), format_value(100 * value / step_ms)))
    rows.sort(key=lambda row: -float(row[2].replace(",", "")))
    title = (
        "what each fix would save, ms per step, read from the traces' own timelines (the "
        f"median step {format_value(step_ms)} ms)"
    )
    return Grid(title=title, header=("if", "whose", "ms", "% of step"), rows=rows)


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
    "bootstrap interval (the bottleneck-analysis paper: up to "
    f"{PAPER_IDLE_PCT}% past {PAPER_STEPS_WORD} steps)"
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
