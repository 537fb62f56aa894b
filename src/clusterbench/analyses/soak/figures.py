"""Soak figures: each listed figure over the rounds, one line per device, drifted ones drawn
thick; with telemetry, each GPU's SM clock over the rounds.

The series drawn are those the soak's table lists (:func:`clusterbench.analyses.soak.section.
shown`): a plot per figure (benchmark, metric and params), at most :data:`MAX_PLOTS`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from clusterbench.analyses.soak.section import NAME, Shown, shown
from clusterbench.analyses.soak.telemetry import DeviceRounds
from clusterbench.schema import Results
from clusterbench.views.figures import axis, color, figure, layout
from clusterbench.views.plots import Plot

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = ["MAX_PLOTS", "figures"]

MAX_PLOTS = 6
MAX_LINES = 8
"""Devices drawn in one plot (drifted ones first)."""


def figures(results: Results, run: RunView) -> list[Plot]:
    analysed = run.part(NAME)
    if results.run.soak is None or analysed is None:
        return []
    items, _ = shown(analysed)
    groups: dict[str, list[Shown]] = defaultdict(list)
    for item in items:
        groups[item.label].append(item)
    plots = [_plot(label, group[:MAX_LINES]) for label, group in list(groups.items())[:MAX_PLOTS]]
    clocks = _clock_plot(analysed.telemetry)
    return plots + ([clocks] if clocks is not None else [])


def _clock_plot(devices: Sequence[DeviceRounds]) -> Plot | None:
    """Each GPU's median SM clock per round (telemetry), one line per device."""
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": f"{d.host}/{d.device}",
            "x": [r for r, v in zip(d.rounds, d.sm_clock_mhz, strict=True) if v is not None],
            "y": [v for v in d.sm_clock_mhz if v is not None],
            "line": {"color": color(f"{d.host}/{d.device}")},
            "hovertemplate": f"{d.device}<br>round %{{x}}<br>%{{y:.0f}} MHz<extra></extra>",
        }
        for d in devices[: MAX_LINES * 2]
        if any(v is not None for v in d.sm_clock_mhz)
    ]
    if not data:
        return None
    fig = figure(data, layout(x=axis("round"), y=axis("median SM clock (MHz)")))
    notes = ["each round's median SM clock over its benchmarks' telemetry windows"]
    return Plot("SM clock over the soak's rounds", fig, notes=notes)


def _plot(label: str, group: list[Shown]) -> Plot:
    unit = group[0].series.unit
    multi_host = len({i.series.host for i in group}) > 1
    data = []
    notes = []
    for item in group:
        s, d = item.series, item.drift
        where = f"{s.host}/{s.device}" if multi_host else s.device
        drifted = d is not None and d.drifted
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": where + (" (drift)" if drifted else ""),
                "x": list(s.rounds),
                "y": list(s.values),
                # each device its own colour; a drifted one drawn thick (and named so)
                "line": {"color": color(where), "width": 3.5 if drifted else 1.5},
                "hovertemplate": f"{where}<br>round %{{x}}<br>%{{y:.4g}} {unit}<extra></extra>",
            }
        )
        if drifted and d is not None:
            notes.append(
                f"{where}: drift, {d.first:.4g} -> {d.last:.4g} {unit} ({d.change:+.0%}), "
                f"Mann-Kendall p={d.p_value:.2g}"
            )
    few = max(len(i.series.rounds) for i in group) <= 20  # a tick per round while they fit
    x = axis("round", dtick=1) if few else axis("round")
    fig = figure(data, layout(x=x, y=axis(f"{group[0].series.metric} ({unit})")))
    notes = notes or ["no drift beyond the noise"]
    return Plot(f"{label} over the soak's rounds", fig, notes=notes)
