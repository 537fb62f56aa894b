"""How long a run is expected to take, per benchmark, before it starts.

Pure: the settings about to run, the timings of earlier comparable runs (from the history) and
a table of timings measured with each suite's presets in, one :class:`Expected` per benchmark
out.  An earlier run counts for a benchmark only when it ran that benchmark with the same
settings; the table only when the benchmark runs at its suite's preset.  A benchmark neither
speaks for has no figure: better none than a made-up one.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Expected", "PastTimings", "TimingTable", "expected_seconds", "pick_table"]

Source = Literal["history", "table", "none"]


@dataclass(frozen=True, kw_only=True, slots=True)
class PastTimings:
    """One earlier comparable run: each benchmark's wall seconds and settings."""

    benchmark_seconds: Mapping[str, float]
    settings: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class TimingTable:
    """Timings measured once with a suite's presets on one kind of machine (package data)."""

    device_type: str
    """'cpu' or 'cuda'."""
    gpu: str | None
    """The GPU model the timings were measured on (None on CPU)."""
    world_size: int
    suite: str
    benchmark_seconds: Mapping[str, float]

    @property
    def label(self) -> str:
        """``table: 1x NVIDIA H200`` or ``table: 2 CPU ranks``: what the figure was measured on."""
        if self.gpu:
            return f"table: {self.world_size}x {self.gpu}"
        return f"table: {self.world_size} CPU rank{'s' if self.world_size != 1 else ''}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Expected:
    benchmark: str
    seconds: float | None
    source: Source
    num_runs: int = 0
    """Earlier runs the figure is the median of (history)."""
    table: str = ""
    """What the table's figure was measured on (table)."""


def pick_table(
    tables: Sequence[TimingTable], *, suite: str, device_type: str, gpu: str | None, world_size: int
) -> TimingTable | None:
    """The table entry closest to this run: the same suite and device type, the same GPU model
    where there is one, then the nearest world size."""
    same = [t for t in tables if t.suite == suite and t.device_type == device_type]
    if not same:
        return None
    return min(same, key=lambda t: (t.gpu != gpu, abs(t.world_size - world_size)))


def expected_seconds(
    *,
    settings: Mapping[str, Any],
    past: Sequence[PastTimings],
    table: TimingTable | None,
    at_preset: Collection[str],
    max_runs: int = 5,
) -> list[Expected]:
    """One figure per benchmark of ``settings`` (benchmark -> its settings, in run order): the
    median over the ``max_runs`` latest of ``past`` (newest first) that ran it with the same
    settings; else the table's, if it runs at its suite's preset (``at_preset``); else none."""
    out = []
    for name, mine in settings.items():
        key = _canonical(mine)
        seen = [
            run.benchmark_seconds[name]
            for run in past
            if name in run.benchmark_seconds and _canonical(run.settings.get(name)) == key
        ][:max_runs]
        if seen:
            out.append(Expected(benchmark=name, seconds=statistics.median(seen),
                                source="history", num_runs=len(seen)))  # fmt: skip
        elif table is not None and name in at_preset and name in table.benchmark_seconds:
            out.append(Expected(benchmark=name, seconds=table.benchmark_seconds[name],
                                source="table", table=table.label))  # fmt: skip
        else:
            out.append(Expected(benchmark=name, seconds=None, source="none"))
    return out


def _canonical(settings: Any) -> str:
    """Settings as JSON text: tuples and lists alike, keys sorted."""
    return json.dumps(settings, sort_keys=True, default=str)
