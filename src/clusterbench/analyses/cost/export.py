"""A cost table as measurements and findings, so that every export (CSV, JSON lines,
Prometheus, W&B) carries it beside the run's own figures: benchmark ``cost``, one
measurement per offer and figure (params: offer, kind, gpus, work, ...), and one ``cost.price``
finding (info) per priced finding, its message the price at every offer.

They are derived, never measured: :func:`with_cost` adds them to a copy of the results for
an export; results.json is never changed.  Pure: no I/O.
"""

from __future__ import annotations

from clusterbench.analyses.cost.findings import PricedFinding
from clusterbench.analyses.cost.scale import PER_TEXT
from clusterbench.analyses.cost.table import CostTable
from clusterbench.metrics import Metric, MetricSet
from clusterbench.schema import Finding, Measurement, ParamValue, Results

__all__ = ["CostMetrics", "cost_findings", "cost_measurements", "price_message", "with_cost"]

_ONLY = "clusterbench cost RUN with prices (cost.json in the run folder; exports only)"
BENCHMARK = "cost"


class CostMetrics(MetricSet, benchmark=BENCHMARK):
    """The cost figures an export carries (params: offer, kind, gpus, work, basis)."""

    usd_per_gpu_hour = Metric("$", "none", "price of a used GPU-hour", only_when=_ONLY)
    usd_per_million_tokens = Metric("$", "none", "$ per 1e6 tokens trained", only_when=_ONLY)
    usd_per_thousand_samples = Metric(
        "$", "none", "$ per 1e3 images or samples trained", only_when=_ONLY
    )
    usd_per_month = Metric("$", "none", "the priced cluster's spend a month", only_when=_ONLY)
    train_time = Metric("s", "lower", "time to train the budget given", only_when=_ONLY)
    train_usd = Metric("$", "none", "cost to train the budget given", only_when=_ONLY)
    break_even_utilisation = Metric(
        "ratio", "none", "utilisation above which on-prem costs less", only_when=_ONLY
    )
    break_even_months = Metric(
        "months", "none", "months after which buying has cost less", only_when=_ONLY
    )
    finding_usd_per_month = Metric(
        "$", "none", "a finding's price a month (params: finding)", only_when=_ONLY
    )


def price_message(p: PricedFinding, table: CostTable) -> str:
    """'<statement> would save $X per month at $Y per GPU-hour (offer), $X2 ... (offer2).'"""
    device = table.throughput.device
    parts = [
        f"${p.savings[o.name]:,.0f} per month at ${o.gpu_hour_usd:,.2f} per {device}-hour "
        f"({o.name})"
        for o in table.offers
        if o.name in p.savings
    ]
    return f"{p.statement} {p.verb} {', '.join(parts)}."


def _measurement(
    table: CostTable, results: Results, metric: Metric, value: float, params: dict[str, ParamValue]
) -> Measurement:
    host = results.hosts[0].hostname if results.hosts else "cluster"
    base: dict[str, ParamValue] = {
        "gpus": table.at.gpus,
        "gpus_per_node": table.at.gpus_per_node,
        "work": table.throughput.work,
        "basis": table.at.basis,
    }
    return Measurement(
        benchmark=BENCHMARK,
        metric=metric.name,
        value=value,
        unit=metric.unit,
        params={**base, **params},
        rank=0,
        host=host,
        device="cluster",
    )


def cost_measurements(table: CostTable, results: Results) -> list[Measurement]:
    C = CostMetrics
    per = (
        C.usd_per_million_tokens
        if table.throughput.work == "tokens"
        else C.usd_per_thousand_samples
    )
    out = []
    for o in table.offers:
        p: dict[str, ParamValue] = {
            "offer": o.name,
            "kind": o.kind,
            "utilisation": table.request.utilisation,
        }
        out += [
            _measurement(table, results, C.usd_per_gpu_hour, o.gpu_hour_usd, p),
            _measurement(table, results, per, o.usd_per_unit, p),
            _measurement(table, results, C.usd_per_month, o.monthly_usd, p),
        ]
        if o.train_s is not None and o.train_usd is not None and table.budget is not None:
            b = {**p, "budget": table.budget}
            out.append(_measurement(table, results, C.train_time, o.train_s, b))
            out.append(_measurement(table, results, C.train_usd, o.train_usd, b))
    for be in table.break_even:
        p = {"cloud": be.cloud, "on_prem": be.on_prem}
        out.append(_measurement(table, results, C.break_even_utilisation, be.utilisation, p))
        if be.months is not None:
            m = {**p, "utilisation": be.at_utilisation}
            out.append(_measurement(table, results, C.break_even_months, be.months, m))
    for f in table.priced:
        for name, usd in f.savings.items():
            p = {"finding": f.finding_id, "scope": f.scope, "offer": name, "price_basis": f.basis}
            out.append(_measurement(table, results, C.finding_usd_per_month, usd, p))
    return out


def cost_findings(table: CostTable) -> list[Finding]:
    """One ``cost.price`` finding (info) per priced finding."""
    return [
        Finding(
            id="cost.price",
            severity="info",
            scope=p.scope,
            message=price_message(p, table),
            evidence={
                "finding": p.finding_id,
                "fraction": p.fraction,
                "basis": p.basis,
                "note": p.note,
                "usd_per_month": p.savings,
                "work": PER_TEXT[table.throughput.work],
            },
            fix=f"See the finding {p.finding_id}: its fix is what the price is of.",
        )
        for p in table.priced
    ]


def with_cost(results: Results, table: CostTable) -> Results:
    """A copy of ``results`` with the cost measurements and ``cost.price`` findings added."""
    return results.model_copy(
        update={
            "measurements": [*results.measurements, *cost_measurements(table, results)],
            "findings": [*results.findings, *cost_findings(table)],
        }
    )
