"""The run's cost in the summary, report.html and exports: at the prices ``clusterbench cost``
kept in the run folder's ``cost.json``, or, with no prices, the throughput alone and the flags
that price it (nothing invented).

``clusterbench cost RUN --gpu-hour ...`` writes ``cost.json`` (the request as given and the
table it computed) and rebuilds summary.md and report.html; ``clusterbench report RUN`` and
``clusterbench export RUN`` read the request back and compute the table again from
results.json, so that a re-analysed run is priced by its current figures.

The section belongs to no one benchmark: :func:`clusterbench.analyses.run.summary_sections`
appends it (``section(results, run_dir)``) when the run measured training throughput.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from clusterbench.analyses.cost.export import with_cost
from clusterbench.analyses.cost.prices import COST_FILE, read_request
from clusterbench.analyses.cost.scale import PER_TEXT, NoThroughput
from clusterbench.analyses.cost.table import CostTable, cost_table
from clusterbench.schema import Results
from clusterbench.units import format_seconds
from clusterbench.views.cells import Grid, Section, format_value

if TYPE_CHECKING:
    from clusterbench.analyses.run import RunAnalysis

__all__ = [
    "COST_FILE",
    "NAME",
    "NO_PRICES",
    "amount",
    "cost_json",
    "duration",
    "money",
    "priced_results",
    "read_request",
    "section",
    "table_grids",
]

NAME = "cost"
NO_PRICES = (
    "clusterbench cost RUN --gpu-hour PRICE (cloud, $ per GPU-hour)",
    "clusterbench cost RUN --capex-per-node $ --years N --power-kw-per-node KW --power-price "
    "$/kWh --pue P --ops-per-year $ (on-prem, per node)",
    "clusterbench cost RUN --prices prices.toml (several offers: [[cloud]], [[on_prem]])",
)
"""What to pass when no price is given (the section's and the command's last lines)."""


def money(usd: float | None) -> str:
    """$1,234,567 · $12.34 · $0.0315 · $0.200 (three significant digits below a dollar)."""
    if usd is None:
        return "-"
    if abs(usd) >= 100:
        return f"${usd:,.0f}"
    if abs(usd) >= 1:
        return f"${usd:,.2f}"
    return f"${usd:#.3g}"


def duration(seconds: float | None) -> str:
    """format_seconds, in days past two days (whole days from 100)."""
    if seconds is None:
        return "-"
    days = seconds / 86400
    if days < 2:
        return format_seconds(seconds)
    return f"{days:,.1f} days" if days < 100 else f"{days:,.0f} days"


def amount(value: float) -> str:
    """1e12 · 2.5e11 · 500,000: powers of ten from a million."""
    if value < 1e6:
        return f"{value:,.0f}"
    mantissa, exponent = f"{value:.3e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


def _budget(table: CostTable) -> str:
    return f"{amount(table.budget)} {table.throughput.work}" if table.budget is not None else ""


def throughput_grid(table: CostTable) -> Grid:
    tp, at = table.throughput, table.at
    dev, per = tp.device, PER_TEXT[tp.work]
    rows: list[tuple[str, ...]] = [
        (
            str(w),
            format_value(rate),
            format_value(100 * tp.efficiency[w]),
            format_value(table.per / (rate * 3600)),
            # the GPUs column says at how many: "from" stays short enough for 80 columns
            "measured" + ("; priced" if at.basis == "measured" and w == at.gpus else ""),
        )
        for w, rate in tp.per_device.items()
    ]
    if at.basis != "measured":
        mark = "*" if at.basis == "assumed" else ""
        rows.append(
            (
                f"{at.gpus}{mark}",
                format_value(at.per_device),
                format_value(100 * at.efficiency),
                format_value(table.per / (at.per_device * 3600)),
                f"(priced) {at.source}",
            )
        )
    title = (
        f"cost: throughput of {tp.case} ({tp.mode} scaling), priced at {at.gpus} {dev}s, "
        f"{at.gpus_per_node} per node ({at.gpus_per_node_source}); {dev}-hours per {per} = "
        f"{amount(table.per)} / ({tp.work}/s per {dev} x 3,600 s)"
        + ("; * assumed" if at.basis == "assumed" else "")
    )
    header = (f"{dev}s", f"{tp.work}/s per {dev}", "efficiency %", f"{dev}-hours per {per}", "from")
    return Grid(title=title, header=header, rows=rows, text_columns=("from",))


def offers_grid(table: CostTable) -> Grid:
    tp, at, u = table.throughput, table.at, table.request.utilisation
    per = PER_TEXT[tp.work]
    budget = _budget(table)
    header: tuple[str, ...] = (
        "offer",
        "kind",
        f"$ per {tp.device}-hour",
        f"$ per {per}",
        f"$ per month ({at.gpus} {tp.device}s)",
    )
    if budget:
        header += (f"time to train {budget}", f"cost to train {budget}")
    rows: list[tuple[str, ...]] = []
    for o in table.offers:
        row: tuple[str, ...] = (
            o.name,
            o.kind.replace("_", "-"),
            money(o.gpu_hour_usd),
            money(o.usd_per_unit),
            money(o.monthly_usd),
        )
        rows.append(row + ((duration(o.train_s), money(o.train_usd)) if budget else ()))
    title = (
        f"cost: per offer at {at.gpus} {tp.device}s busy {u:.0%} of the time (--utilisation); "
        f"{tp.work}/s per {tp.device} {format_value(at.per_device)} ({at.basis}); month = 730 h"
    )
    return Grid(title=title, header=header, rows=rows, text_columns=("offer", "kind"))


def on_prem_grid(table: CostTable) -> Grid | None:
    rows: list[tuple[str, ...]] = [
        (o.name, money(y.capex), money(y.power), money(y.ops), money(y.total))
        for o in table.offers
        if (y := o.node_year) is not None
    ]
    if not rows:
        return None
    return Grid(
        title="cost: on-prem, one node's year: capex / years, power kW x PUE x 8,760 h x $/kWh, "
        "operations",
        header=("offer", "capex", "power", "operations", "total"),
        rows=rows,
        text_columns=("offer",),
    )


def break_even_grid(table: CostTable) -> Grid | None:
    if not table.break_even:
        return None
    rows: list[tuple[str, ...]] = [
        (
            b.cloud,
            b.on_prem,
            "never" if b.utilisation >= 1 else f"{b.utilisation:.1%}",
            "never" if b.months is None else f"{b.months:,.1f}",
            f"{b.life_months:g}",
            b.on_prem if b.on_prem_cheaper else b.cloud,
        )
        for b in table.break_even
    ]
    u = table.request.utilisation
    return Grid(
        title=f"cost: cloud against on-prem (on-prem costs less above the break-even "
        f"utilisation, and has paid for itself after the break-even months at {u:.0%}); "
        f"{table.rule_of_thumb}",
        header=(
            "cloud",
            "on-prem",
            "break-even utilisation",
            "break-even months",
            "on-prem life months",
            f"cheaper at {u:.0%}",
        ),
        rows=rows,
        text_columns=("cloud", "on-prem", f"cheaper at {u:.0%}"),
    )


def findings_grid(table: CostTable) -> Grid | None:
    if not table.priced:
        return None
    names = [o.name for o in table.offers]
    rows: list[tuple[str, ...]] = [
        (
            p.finding_id,
            p.statement,
            p.verb,
            p.basis,
            f"{100 * p.fraction:.1f}",
            *(money(p.savings.get(n)) for n in names),
            p.note,
        )
        for p in table.priced
    ]
    return Grid(
        title=f"cost: the price of each finding on the {table.at.gpus}-{table.throughput.device} "
        "cluster: its share of the time x the cluster's spend a month (each priced alone: they "
        "may overlap, do not add them up)",
        header=(
            "finding",
            "what",
            "price",
            "basis",
            "share %",
            *(f"$ per month ({n})" for n in names),
            "how",
        ),
        rows=rows,
        text_columns=("finding", "what", "price", "basis", "how"),
    )


def table_grids(table: CostTable, *, findings: bool = True) -> list[Grid]:
    """Every grid of the table, in reading order (``findings``: the priced findings' too);
    with no offer, the flags to pass last."""
    grids = [throughput_grid(table)]
    if table.offers:
        grids.append(offers_grid(table))
    grids += [g for g in (on_prem_grid(table), break_even_grid(table)) if g]
    priced = findings_grid(table) if findings else None
    grids += [priced] if priced is not None else []
    if table.unpriced:
        grids.append(
            Grid(
                title="cost: findings with a gain, not priced",
                header=("finding", "scope", "why"),
                rows=[(u.finding_id, u.scope, u.reason) for u in table.unpriced],
                text_columns=("finding", "scope", "why"),
            )
        )
    if not table.offers:
        grids.append(
            Grid(
                title="cost: no prices given, so no money figure (nothing is assumed)",
                header=("to price the run, pass",),
                rows=[(line,) for line in NO_PRICES],
                text_columns=("to price the run, pass",),
            )
        )
    return grids


def cost_json(table: CostTable) -> str:
    return json.dumps(table.to_dict(), indent=2, allow_nan=False) + "\n"


def section(results: Results, run: RunAnalysis) -> Section | None:
    """The run's one cost table (None: the run has no training throughput to price)."""
    table = run.part("cost")
    if table is None:
        return None
    if isinstance(table, str):  # the cost must never cost the run its summary: say why instead
        return Section(
            NAME, grids=[Grid(title="cost: not computed", header=("why",), rows=[(table,)])]
        )
    return Section(NAME, grids=table_grids(table))


def priced_results(results: Results, run_dir: Path) -> Results:
    """``results`` with the cost of ``run_dir/cost.json`` added for an export (unchanged
    without the file or without training throughput); ValueError for a file not read."""
    request = read_request(run_dir)
    if request is None or not request.offers:
        return results
    try:
        table = cost_table(results, request)
    except NoThroughput:
        return results
    return with_cost(results, table)
