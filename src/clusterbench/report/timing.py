"""Where a run's time went, and how long the next one is expected to take: one line each."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from clusterbench.analysis.duration import Expected
from clusterbench.schema import Results
from clusterbench.units import format_seconds

__all__ = ["expected_line", "time_line"]


def time_line(results: Results) -> str:
    """``time: gemm 12.3 s, memory 4.1 s (total 16.4 s of a 25 s run)``; '' when the run kept
    no timings (older results)."""
    seconds = results.run.benchmark_seconds
    if not seconds:
        return ""
    parts = ", ".join(f"{name} {format_seconds(s)}" for name, s in seconds.items())
    total = f"total {format_seconds(sum(seconds.values()))}"
    wall = _wall_seconds(results.run.started, results.run.finished)
    if wall is not None and wall >= sum(seconds.values()):
        total += f" of a {format_seconds(wall)} run"
    return f"time: {parts} ({total})"


def _wall_seconds(started: str, finished: str | None) -> float | None:
    try:
        begin = dt.datetime.fromisoformat(started.replace("Z", "+00:00"))
        end = dt.datetime.fromisoformat((finished or "").replace("Z", "+00:00"))
    except ValueError:
        return None
    if (begin.tzinfo is None) != (end.tzinfo is None):
        return None
    return (end - begin).total_seconds()


def expected_line(expected: Sequence[Expected]) -> str:
    """``expected ~95 s: gemm ~20 s, memory ~5 s (table: 1x NVIDIA H200), training ?``: each
    source after the run of benchmarks it speaks for (once, up front, when it is the only one).
    The total counts the benchmarks with a figure; '?': no earlier run with these settings and
    no table entry."""
    known = [e for e in expected if e.seconds is not None]
    if not known:
        names = ", ".join(e.benchmark for e in expected)
        return (
            f"expected time unknown (no earlier run with these settings, no timing table): {names}"
        )
    sources = {_source(e) for e in known}
    one = sources.pop() if len(sources) == 1 else None
    parts = []
    for e, after in zip(expected, [*expected[1:], None], strict=True):
        if e.seconds is None:
            parts.append(f"{e.benchmark} ?")
            continue
        part = f"{e.benchmark} ~{format_seconds(e.seconds)}"
        last_of_run = after is None or after.seconds is None or _source(after) != _source(e)
        parts.append(part if one or not last_of_run else f"{part} ({_source(e)})")
    head = f"expected ~{format_seconds(sum(e.seconds or 0.0 for e in known))}"
    if len(known) < len(expected):
        head += f" for {len(known)} of {len(expected)} benchmarks"
    if one:
        head += f" ({one})"
    return f"{head}: {', '.join(parts)}"


def _source(e: Expected) -> str:
    if e.source == "history":
        return f"history, {e.num_runs} run{'s' if e.num_runs != 1 else ''}"
    return e.table
