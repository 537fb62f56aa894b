"""What the cluster costs per unit of work, at the prices given: $ per million tokens (per
thousand images or samples), the time and cost to train a budget, cloud against on-prem, and
the price of each finding.

From the run's measured training throughput per GPU and its scaling efficiency at the GPU
count priced (:mod:`.cost_scale`: measured, predicted by the scaling model, or assumed), the
offers' price of a used GPU-hour (:mod:`.cost_prices`), and each finding's share of the
training time (:mod:`.cost_findings`, :mod:`.cost_nodes`).  The formulas, with their units,
are in docs/reference.md ("Cost per unit of work").  Pure: no I/O; ``clusterbench cost`` and
the report render :class:`CostTable`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clusterbench.analyses.cost.findings import PricedFinding, Unpriced, price_advice, price_targets
from clusterbench.analyses.cost.nodes import price_slow_nodes
from clusterbench.analyses.cost.prices import (
    HOURS_PER_MONTH,
    RULE_OF_THUMB_UTILISATION,
    RULE_OF_THUMB_YEARS,
    CloudOffer,
    CostRequest,
    NodeYear,
    OnPremOffer,
    break_even_months,
    break_even_utilisation,
    gpu_hour_usd,
    node_year,
    read_request,
)
from clusterbench.analyses.cost.scale import (
    PER,
    AtScale,
    NoThroughput,
    Throughput,
    at_scale,
    throughput,
)
from clusterbench.schema import Results
from clusterbench.thresholds import run_thresholds

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = [
    "BreakEven",
    "CostTable",
    "OfferCost",
    "cost_table",
    "gpu_hours_per_unit",
    "monthly_usd",
    "run_cost",
    "train_seconds",
    "usd_per_unit",
]


def usd_per_unit(gpu_hour: float, *, per_device_rate: float, per: float) -> float:
    """$ per ``per`` units of work: gpu_hour / (rate x 3,600 s) x per (rate: work/s per GPU)."""
    return gpu_hour / (per_device_rate * 3600) * per


def gpu_hours_per_unit(*, per_device_rate: float, per: float) -> float:
    """GPU-hours ``per`` units of work take: per / (rate x 3,600 s)."""
    return per / (per_device_rate * 3600)


def train_seconds(work: float, *, base_rate: float, efficiency: float, gpus: int) -> float:
    """Seconds to train ``work`` units on ``gpus``: work / (rate at 1 GPU x gpus x efficiency)."""
    return work / (base_rate * gpus * efficiency)


def monthly_usd(gpu_hour: float, *, gpus: int, utilisation: float) -> float:
    """$ a month of ``gpus`` busy ``utilisation`` of the 730 h: gpus x 730 h x u x gpu_hour."""
    return gpus * HOURS_PER_MONTH * utilisation * gpu_hour


@dataclass(frozen=True, slots=True, kw_only=True)
class OfferCost:
    name: str
    kind: str
    gpu_hour_usd: float
    """$ per used GPU-hour (on-prem: at the utilisation given)."""
    usd_per_unit: float
    """$ per PER[work] units at the GPU count priced."""
    monthly_usd: float
    """The priced cluster's $ a month."""
    train_s: float | None
    train_usd: float | None
    node_year: NodeYear | None = None
    """On-prem: a node's year by part."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakEven:
    """One cloud offer against one on-prem offer."""

    cloud: str
    on_prem: str
    utilisation: float
    """Above it on-prem costs less (above 1: never)."""
    months: float | None
    """At the utilisation given, the months after which buying has cost less (None: never)."""
    life_months: float
    """The on-prem offer's years x 12."""
    at_utilisation: float

    @property
    def on_prem_cheaper(self) -> bool:
        return self.at_utilisation > self.utilisation

    def verdict(self) -> str:
        if self.utilisation >= 1:
            return f"{self.on_prem} never costs less than {self.cloud}, even at 100% utilisation"
        at = f"at {self.at_utilisation:.0%} utilisation"
        if not self.on_prem_cheaper:
            return (
                f"{at} {self.cloud} costs less than {self.on_prem} (break-even "
                f"{self.utilisation:.1%})"
            )
        assert self.months is not None  # on-prem cheaper: the purchase pays back in its life
        return (
            f"{at} {self.on_prem} costs less than {self.cloud} (break-even "
            f"{self.utilisation:.1%}); buying pays back after {self.months:.1f} months"
        )


def _rule_of_thumb() -> str:
    return (
        f"rule of thumb (the cluster-benchmarking guide): above "
        f"~{RULE_OF_THUMB_UTILISATION:.0%} utilisation for {RULE_OF_THUMB_YEARS:.0f}+ years "
        "favours on-prem; the computed break-even decides"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CostTable:
    """Everything ``clusterbench cost`` says about one run at one request."""

    request: CostRequest
    throughput: Throughput
    at: AtScale
    budget: float | None
    """The work to train (tokens, or images / samples), None: none given."""
    offers: list[OfferCost]
    break_even: list[BreakEven]
    priced: list[PricedFinding]
    unpriced: list[Unpriced]

    @property
    def per(self) -> float:
        return PER[self.throughput.work]

    @property
    def rule_of_thumb(self) -> str:
        return _rule_of_thumb()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types (non-finite numbers as None); the request as it was given."""
        at = {
            f.name: getattr(self.at, f.name)
            for f in dataclasses.fields(self.at)
            if f.name != "prediction"
        }
        return _finite(
            {
                "request": self.request.model_dump(mode="json"),
                "throughput": dataclasses.asdict(self.throughput),
                "at": at,
                "work": self.throughput.work,
                "per": self.per,
                "budget": self.budget,
                "offers": [dataclasses.asdict(o) for o in self.offers],
                "break_even": [
                    {**dataclasses.asdict(b), "verdict": b.verdict()} for b in self.break_even
                ],
                "rule_of_thumb": self.rule_of_thumb,
                "priced": [dataclasses.asdict(p) for p in self.priced],
                "unpriced": [dataclasses.asdict(u) for u in self.unpriced],
            }
        )


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _budget(request: CostRequest, tp: Throughput) -> float | None:
    return request.train_tokens if tp.work == "tokens" else request.train_samples


def _offer_cost(
    offer: CloudOffer | OnPremOffer,
    at: AtScale,
    *,
    tp: Throughput,
    request: CostRequest,
    budget: float | None,
) -> OfferCost:
    u = request.utilisation
    price = gpu_hour_usd(offer, gpus_per_node=at.gpus_per_node, utilisation=u)
    seconds = None
    if budget is not None:
        base = at.per_device / at.efficiency
        seconds = train_seconds(budget, base_rate=base, efficiency=at.efficiency, gpus=at.gpus)
    return OfferCost(
        name=offer.name,
        kind=offer.kind,
        gpu_hour_usd=price,
        usd_per_unit=usd_per_unit(price, per_device_rate=at.per_device, per=PER[tp.work]),
        monthly_usd=monthly_usd(price, gpus=at.gpus, utilisation=u),
        train_s=seconds,
        train_usd=None if seconds is None else seconds / 3600 * at.gpus * price,
        node_year=node_year(offer) if isinstance(offer, OnPremOffer) else None,
    )


def _break_even(request: CostRequest, g: int) -> list[BreakEven]:
    clouds = [o for o in request.offers if isinstance(o, CloudOffer)]
    on_prems = [o for o in request.offers if isinstance(o, OnPremOffer)]
    return [
        BreakEven(
            cloud=c.name,
            on_prem=o.name,
            at_utilisation=request.utilisation,
            utilisation=break_even_utilisation(c, o, gpus_per_node=g),
            months=break_even_months(c, o, gpus_per_node=g, utilisation=request.utilisation),
            life_months=12 * o.years,
        )
        for c in clouds
        for o in on_prems
    ]


def cost_table(results: Results, request: CostRequest) -> CostTable:
    """The run's cost at ``request``'s offers (none: the throughput and GPU-hours alone).
    NoThroughput (a ValueError) when the run has no training throughput."""
    tp = throughput(results)
    gpus = request.gpus if request.gpus is not None else results.run.world_size
    at = at_scale(results, tp, gpus=gpus, gpus_per_node=request.gpus_per_node)
    budget = _budget(request, tp)
    offers = [_offer_cost(o, at, tp=tp, request=request, budget=budget) for o in request.offers]
    thresholds = run_thresholds(results)
    found = [
        *price_targets(results, at, tp, thresholds),
        *price_advice(results, at),
        *price_slow_nodes(results, at, thresholds),
    ]
    spend = {o.name: o.monthly_usd for o in offers}
    priced = [
        dataclasses.replace(p, savings={name: m * p.fraction for name, m in spend.items()})
        for p in found
        if isinstance(p, PricedFinding)
    ]
    return CostTable(
        request=request,
        throughput=tp,
        at=at,
        budget=budget,
        offers=offers,
        break_even=_break_even(request, at.gpus_per_node),
        priced=sorted(priced, key=lambda p: -p.fraction),
        unpriced=[u for u in found if isinstance(u, Unpriced)],
    )


def run_cost(results: Results, run: RunView) -> CostTable | str | None:
    """The run's cost part: its cost at the prices of its folder's cost.json (unpriced without
    one), what its section and figures show; None where it has no training throughput to price;
    the reason where it could not be computed."""
    try:
        request = read_request(run.run_dir) if run.run_dir is not None else None
        return cost_table(results, request or CostRequest())
    except NoThroughput:
        return None
    except Exception as exc:  # the cost must never cost the run its pages
        return str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
