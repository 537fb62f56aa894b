"""The run's cost in report.html, at the prices of its cost.json: what each offer has cost the
priced cluster after m months (cloud: rent at the utilisation given; on-prem: the purchase at
month 0, then power and operations), where the lines cross is the break-even; and the price
of each finding a month, per offer.  Computed, not measured (``meta`` "cost").  No prices:
no plots (the section says which flags to pass).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from clusterbench.analyses.cost.prices import HOURS_PER_MONTH, OnPremOffer
from clusterbench.analyses.cost.table import CostTable
from clusterbench.schema import Results
from clusterbench.views.figures import Trace, axis, color, figure, layout
from clusterbench.views.plots import Plot

if TYPE_CHECKING:
    from clusterbench.analyses.run import RunAnalysis

__all__ = ["figures", "spend_after"]


def spend_after(table: CostTable, months: float) -> dict[str, float]:
    """Offer -> $ the priced cluster has cost after ``months``: cloud gpus x 730 h x u x price
    x months; on-prem nodes x (capex + running / 12 x months)."""
    at, u = table.at, table.request.utilisation
    nodes = at.gpus / at.gpus_per_node
    out = {}
    for offer, o in zip(table.request.offers, table.offers, strict=True):
        if isinstance(offer, OnPremOffer) and o.node_year is not None:
            out[o.name] = nodes * (offer.capex_per_node + o.node_year.running / 12 * months)
        else:
            out[o.name] = at.gpus * HOURS_PER_MONTH * u * o.gpu_hour_usd * months
    return out


def _spend(table: CostTable) -> Plot:
    life = max((b.life_months for b in table.break_even), default=36.0)
    crossing = [b.months for b in table.break_even if b.months is not None]
    end = max(life, 1.25 * max(crossing, default=0.0), 12.0)
    months = [end * i / 48 for i in range(49)]
    data: list[Trace] = []
    for o in table.offers:
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{o.name} ({o.kind.replace('_', '-')})",
                "x": months,
                "y": [spend_after(table, m)[o.name] for m in months],
                "line": {"color": color(o.name)},
                "meta": "cost",
                "hovertemplate": "%{x:.1f} months: $%{y:,.0f}<extra>" + o.name + "</extra>",
            }
        )
    notes = [b.verdict() for b in table.break_even] + [table.rule_of_thumb]
    return Plot(
        title=f"cost: what each offer has cost the {table.at.gpus}-GPU cluster after m months",
        figure=figure(data, layout(x=axis("time (months)"), y=axis("cumulative cost ($)"))),
        notes=notes,
    )


def _findings(table: CostTable) -> Plot:
    names = [p.finding_id + ("" if p.scope == "run" else f" ({p.scope})") for p in table.priced]
    data: list[Trace] = [
        {
            "type": "bar",
            "orientation": "h",
            "name": o.name,
            "y": names,
            "x": [p.savings.get(o.name, math.nan) for p in table.priced],
            "marker": {"color": color(o.name)},
            "meta": "cost",
            "hovertemplate": "%{y}: $%{x:,.0f} per month<extra>" + o.name + "</extra>",
        }
        for o in table.offers
    ]
    fig_layout = layout(
        x=axis("price a month ($)"),
        y=axis("finding", type="category", autorange="reversed"),
        barmode="group",
    )
    return Plot(
        title="cost: the price of each finding a month, per offer", figure=figure(data, fig_layout)
    )


def figures(results: Results, run: RunAnalysis) -> list[Plot]:
    """The spend over months (with a cloud and an on-prem offer) and the findings' prices;
    [] without prices in ``run_dir``."""
    table = run.part("cost")
    if not isinstance(table, CostTable) or not table.request.offers:
        return []
    plots = []
    if table.break_even:
        plots.append(_spend(table))
    if table.priced:
        plots.append(_findings(table))
    return plots
