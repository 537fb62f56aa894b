"""Where a run's time went, in one line."""

from __future__ import annotations

import datetime as dt

from clusterbench.schema import Results
from clusterbench.units import format_seconds

__all__ = ["phase_line", "time_line"]


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


def phase_line(results: Results) -> str:
    """``phases: start 1.3 s, imports 1.9 s, ..., page 0.1 s`` (results.json's
    ``run.phase_seconds``: the time no benchmark accounts for); '' when none was timed."""
    phases = results.run.phase_seconds
    if not phases:
        return ""
    return "phases: " + ", ".join(f"{name} {format_seconds(s)}" for name, s in phases.items())
