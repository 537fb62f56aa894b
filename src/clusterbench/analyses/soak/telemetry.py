"""A soak's GPU telemetry round by round: per device, the median SM clock and the highest
temperature of each round, from the benchmarks' telemetry windows (``results.telemetry``).

A figure that drifts while the SM clock falls and the temperature climbs is thermal; one that
drifts at a steady clock is something else.  CPU workers sample no telemetry: none here.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from clusterbench.schema import Results

__all__ = ["DeviceRounds", "round_telemetry"]


@dataclass(frozen=True, slots=True)
class DeviceRounds:
    """One GPU's telemetry per soak round (rounds in order; None: not reported that round)."""

    host: str
    device: str
    rounds: tuple[int, ...]
    sm_clock_mhz: tuple[float | None, ...]
    """The median over the round's windows of each window's median SM clock."""
    temp_c_max: tuple[float | None, ...]
    """The highest temperature of the round's windows."""

    def first_last(self, values: tuple[float | None, ...]) -> tuple[float, float] | None:
        known = [v for v in values if v is not None]
        return (known[0], known[-1]) if len(known) > 1 else None


def round_telemetry(results: Results) -> list[DeviceRounds]:
    """Every GPU's telemetry by soak round, devices in first-seen order (none outside a soak
    or without telemetry)."""
    clocks: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    temps: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for w in results.telemetry:
        if w.round is None or w.summary is None:
            continue
        key = (w.host, w.device)
        clocks[key].setdefault(w.round, [])
        if w.summary.sm_clock_mhz_median is not None:
            clocks[key][w.round].append(w.summary.sm_clock_mhz_median)
        if w.summary.temp_c_max is not None:
            temps[key][w.round].append(w.summary.temp_c_max)
    out = []
    for (host, device), by_round in clocks.items():
        rounds = tuple(sorted(by_round))
        temp = temps.get((host, device), {})
        out.append(
            DeviceRounds(
                host=host,
                device=device,
                rounds=rounds,
                sm_clock_mhz=tuple(
                    statistics.median(by_round[r]) if by_round[r] else None for r in rounds
                ),
                temp_c_max=tuple(max(temp[r]) if temp.get(r) else None for r in rounds),
            )
        )
    return out
