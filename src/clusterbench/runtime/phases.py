"""The phases of a run's start and end, timed (``run.phase_seconds`` in results.json): where
the seconds go that no benchmark accounts for."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["PHASES", "ordered_phases", "process_age_s"]

PHASES = (
    "start",
    "imports",
    "plan",
    "worker imports",
    "worker start",
    "device init",
    "probe",
    "telemetry start",
    "finish",
    "page",
)
"""In the order they happen: start (the process up to the run: the interpreter and the command
line), imports (the device check; and torch, where this process is a rank: a run that starts its
own workers leaves torch to their fork server), plan, worker imports (what of the fork server's
import of torch and the workers' modules was still to come at the launch), worker start (the
rest of the launch to a worker running), device init (the process group and the device), probe
(the node's hardware), telemetry start, then the benchmarks, finish (assemble and analyse) and
page (build report.html)."""


def process_age_s() -> float | None:
    """Seconds since this process started (Linux: its start in clock ticks since boot, against
    the boot-time clock; 10 ms resolution), or None where that cannot be read."""
    try:
        fields = Path("/proc/self/stat").read_text().rpartition(")")[2].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def ordered_phases(*parts: Mapping[str, float] | Iterable[tuple[str, float]]) -> dict[str, float]:
    """The phases of several sources in :data:`PHASES` order (a phase given twice: the
    longer), each rounded to the millisecond; unknown names after them."""
    merged: dict[str, float] = {}
    for part in parts:
        for name, seconds in dict(part).items() if isinstance(part, Mapping) else part:
            merged[name] = max(merged.get(name, 0.0), seconds)
    rank = {name: i for i, name in enumerate(PHASES)}
    names = sorted(merged, key=lambda n: (rank.get(n, len(PHASES)), n))
    return {name: round(merged[name], 3) for name in names}
