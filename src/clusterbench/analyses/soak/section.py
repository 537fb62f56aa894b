"""The soak part of the summary: each figure over the rounds (first, last, change, slope, the
trend's p and the verdict), drifted series first; each GPU's SM clock and temperature in the
first and last round (with telemetry); and the one line the console ends with.

Appended by :func:`clusterbench.analyses.run.summary_sections` after the benchmarks' sections,
from every round (the benchmarks' own sections show one round).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterbench.analyses.soak.drift import MIN_ROUNDS, Drift, Series, SoakAnalysis
from clusterbench.analyses.soak.findings import describe_drift, soak_seconds
from clusterbench.analyses.soak.telemetry import DeviceRounds
from clusterbench.schema import Results
from clusterbench.units import format_seconds
from clusterbench.views.cells import Grid, Section, format_value

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = ["MAX_ROWS", "NAME", "Shown", "section", "shown", "soak_line"]

NAME = "soak"
MAX_ROWS = 20
"""Series listed (and drawn): every drifted one first, then the most changed."""
_HEADER = ("figure", "device", "rounds", "unit", "first", "last", "change", "slope", "trend p",
           "verdict")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Shown:
    """A series the soak's table lists, with its trend (None: too few rounds to test)."""

    series: Series
    drift: Drift | None

    @property
    def label(self) -> str:
        s = self.series
        params = ", ".join(f"{k}={v}" for k, v in s.params.items())
        return f"{s.name} ({params})" if params else s.name

    @property
    def verdict(self) -> str:
        d = self.drift
        if d is None:
            return f"< {MIN_ROUNDS} rounds"
        if d.drifted:
            return "drift"
        return "within limits" if d.worse else "no drift"


def _first_last(s: Series, d: Drift | None) -> tuple[float, float]:
    return (d.first, d.last) if d is not None else (s.values[0], s.values[-1])


def _change(item: Shown) -> float:
    first, last = _first_last(item.series, item.drift)
    return abs(last - first) / abs(first) if first else 0.0


def shown(soak: SoakAnalysis) -> tuple[list[Shown], int]:
    """The series to list (drifted first, then by size of change; at most :data:`MAX_ROWS`)
    and how many series could drift (those of a figure with a better side)."""
    pairs = zip(soak.series, soak.drifts, strict=True)
    items = [Shown(s, d) for s, d in pairs if s.direction is not None]
    items.sort(key=lambda i: (not (i.drift is not None and i.drift.drifted), -_change(i)))
    return items[:MAX_ROWS], len(items)


def _row(item: Shown, *, multi_host: bool) -> tuple[str, ...]:
    s, d = item.series, item.drift
    first, last = _first_last(s, d)
    change = f"{(last - first) / abs(first):+.1%}" if first else "-"
    slope = "-" if d is None else f"{d.slope:+.3g}/{'h' if d.per_hour else 'round'}"
    return (
        item.label,
        f"{s.host}/{s.device}" if multi_host else s.device,
        str(len(s.values)),
        s.unit,
        format_value(first),
        format_value(last),
        change,
        slope,
        "-" if d is None else f"{d.p_value:.2g}",
        item.verdict,
    )


def section(results: Results, run: RunView) -> Section | None:
    """The soak's table (None outside a soak, or a soak that measured nothing)."""
    soak, analysed = results.run.soak, run.part(NAME)
    if soak is None or analysed is None:
        return None
    items, total = shown(analysed)
    if not items:
        return None
    multi_host = len({i.series.host for i in items}) > 1
    wall = soak_seconds(soak)
    title = f"{soak.rounds} rounds, {soak.completed} complete"
    title += f" in {format_seconds(wall)}" if wall is not None else ""
    if total > len(items):
        title += f" · {len(items)} of {total} series, drifted and most changed first"
    grid = Grid(title=title, header=_HEADER, rows=[_row(i, multi_host=multi_host) for i in items])
    telemetry = _telemetry_grid(analysed.telemetry, multi_host=multi_host)
    return Section(NAME, grids=[grid, *([telemetry] if telemetry is not None else [])])


def _telemetry_grid(devices: Sequence[DeviceRounds], *, multi_host: bool) -> Grid | None:
    """Per GPU the first and last round's median SM clock and highest temperature."""
    rows: list[tuple[str, ...]] = []
    for d in devices:
        clock, temp = d.first_last(d.sm_clock_mhz), d.first_last(d.temp_c_max)
        if clock is None and temp is None:
            continue
        change = f"{(clock[1] - clock[0]) / clock[0]:+.1%}" if clock and clock[0] else "-"
        rows.append((
            f"{d.host}/{d.device}" if multi_host else d.device,
            str(len(d.rounds)),
            f"{clock[0]:.0f}" if clock else "-",
            f"{clock[1]:.0f}" if clock else "-",
            change,
            f"{temp[0]:.0f}" if temp else "-",
            f"{temp[1]:.0f}" if temp else "-",
        ))  # fmt: skip
    if not rows:
        return None
    header = ("device", "rounds", "SM MHz first", "SM MHz last", "change", "max °C first",
              "max °C last")  # fmt: skip
    return Grid(title="GPU telemetry over the rounds", header=header, rows=rows)


def soak_line(run: RunView) -> str:
    """The console's last word on a soak: rounds, and what drifted ('' outside a soak)."""
    soak, analysed = run.results.run.soak, run.part(NAME)
    if soak is None or analysed is None:
        return ""
    items, total = shown(analysed)
    wall = soak_seconds(soak)
    took = f" in {format_seconds(wall)}" if wall is not None else ""
    line = f"soak: {soak.rounds} rounds, {soak.completed} complete{took}"
    if soak.stopped_in is not None:
        line += f", stopped in round {soak.stopped_in}"
    drifted = [i.drift for i in items if i.drift is not None and i.drift.drifted]
    if not drifted:
        return f"{line} · no drift beyond the noise in {total} series"
    worst = drifted[0]
    more = f" (and {len(drifted) - 1} more)" if len(drifted) > 1 else ""
    return (
        f"{line} · drift: {worst.series.name} on {worst.series.device}, "
        f"{describe_drift(worst)}{more}"
    )
