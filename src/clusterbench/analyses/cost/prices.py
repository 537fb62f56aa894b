"""The prices a cost is computed at, as the user gives them, and the formulas that need
nothing but prices: what a GPU-hour costs on each offer and where cloud and on-prem break even.

Two kinds of offer (docs/reference.md, "Cost per unit of work"):

- **cloud**: a price per GPU-hour, paid for the hours used;
- **on-prem**: bought nodes, paid whether busy or not: the purchase (``capex_per_node``)
  written off over ``years``, the power (``power_kw_per_node`` average draw x ``pue`` x 8,760
  h x ``power_price`` per kWh) and operations (``ops_per_year``: staff, support, space) per
  node and year.  A used GPU-hour costs that over the hours the GPUs are busy.

Every price is a positive finite number (a negative, zero or NaN price, a PUE below 1 is a
:class:`PriceError`, one line naming the flag or the key); nothing is assumed for a price not
given.  The currency is whatever the prices are in (shown as $).  Pure: no I/O; the price file
comes in as its parsed TOML table.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

__all__ = [
    "COST_FILE",
    "HOURS_PER_MONTH",
    "HOURS_PER_YEAR",
    "RULE_OF_THUMB_UTILISATION",
    "RULE_OF_THUMB_YEARS",
    "CloudOffer",
    "CostRequest",
    "NodeYear",
    "Offer",
    "OnPremOffer",
    "PriceError",
    "break_even_months",
    "break_even_utilisation",
    "gpu_hour_usd",
    "node_year",
    "offer_from",
    "offers_from_table",
    "parse_amount",
    "read_request",
]

HOURS_PER_YEAR = 8760.0
"""365 days x 24 h."""
HOURS_PER_MONTH = HOURS_PER_YEAR / 12
"""730 h: a month as a twelfth of the year."""
RULE_OF_THUMB_UTILISATION = 0.70
RULE_OF_THUMB_YEARS = 2.0
"""The cluster-benchmarking guide's rule (docs/sources.md; its section "How to Choose Between
AWS and On-Premise GPU Clusters"): on-prem wins with "constant, high utilization (>70%) for 2+
years".  Stated beside the computed break-even, which decides."""

_SUFFIXES = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "B": 1e9, "T": 1e12}
_AMOUNT = re.compile(r"\$?\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([kKMGBT]?)")


class PriceError(ValueError):
    """A price or option that cannot be used; ``str()`` is one line naming where it came from."""


def parse_amount(value: object) -> float:
    """A number as people write prices and budgets: ``2.5``, ``$2.50``, ``1e12``, ``250k``,
    ``1.5M``, ``1T`` (k/K 1e3, M 1e6, G or B 1e9, T 1e12; ``,`` and ``_`` as digit groups).
    A bool, or text that is none of these, is a ValueError."""
    if isinstance(value, bool):
        raise ValueError(f"a number is needed, got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"a number is needed, got {value!r}")
    text = value.strip().replace(",", "").replace("_", "")
    if text.lower() in ("nan", "inf", "+inf", "-inf", "infinity"):
        return float(text)
    match = _AMOUNT.fullmatch(text)
    if match is None:
        raise ValueError(f"{value!r} is not a number (e.g. 2.5, 1e12, 250k, 1T)")
    return float(match[1]) * _SUFFIXES.get(match[2], 1.0)


def _finite_positive(value: object) -> float:
    number = parse_amount(value)
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"must be a positive finite number, got {value!r}")
    return number


def _pue(value: object) -> float:
    number = parse_amount(value)
    if not math.isfinite(number) or number < 1:
        raise ValueError(f"a PUE is facility power / IT power, 1 or more, got {value!r}")
    return number


Positive = Annotated[float, BeforeValidator(_finite_positive)]
Pue = Annotated[float, BeforeValidator(_pue)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CloudOffer(_Model):
    """GPUs rented by the hour."""

    kind: Literal["cloud"] = "cloud"
    name: str = Field(default="cloud", min_length=1)
    gpu_hour: Positive = Field(description="$ per GPU-hour")


class OnPremOffer(_Model):
    """Nodes bought and run: every figure per node."""

    kind: Literal["on_prem"] = "on_prem"
    name: str = Field(default="on-prem", min_length=1)
    capex_per_node: Positive = Field(description="$ a node costs to buy and install")
    years: Positive = Field(description="years the purchase is written off over")
    power_kw_per_node: Positive = Field(description="kW a node draws on average")
    power_price: Positive = Field(description="$ per kWh")
    pue: Pue = Field(description="power usage effectiveness: facility / IT power, >= 1")
    ops_per_year: Positive = Field(description="$ per node and year: staff, support, space")


Offer = Annotated[CloudOffer | OnPremOffer, Field(discriminator="kind")]


def _fraction(value: object) -> float:
    number = parse_amount(value)
    if not math.isfinite(number) or not 0 < number <= 1:
        raise ValueError(f"a utilisation is a fraction in (0, 1], got {value!r}")
    return number


def _count(value: object) -> int:
    number = parse_amount(value)
    if not math.isfinite(number) or number < 1 or number != int(number):
        raise ValueError(f"must be a whole number of 1 or more, got {value!r}")
    return int(number)


class CostRequest(_Model):
    """What ``clusterbench cost`` was asked: the offers and the cluster they price (kept in
    the run folder's cost.json, so that the summary, report and exports show it again)."""

    offers: list[Offer] = Field(default_factory=list)
    gpus: Annotated[int, BeforeValidator(_count)] | None = Field(
        default=None, description="GPUs of the cluster priced (None: the run's world size)"
    )
    gpus_per_node: Annotated[int, BeforeValidator(_count)] | None = None
    utilisation: Annotated[float, BeforeValidator(_fraction)] = Field(
        default=1.0, description="share of the hours the GPUs are busy"
    )
    train_tokens: Positive | None = None
    train_samples: Positive | None = None

    @model_validator(mode="after")
    def _names_differ(self) -> CostRequest:
        names = [o.name for o in self.offers]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"two offers named {twice[0]!r}: give each a name of its own")
        return self


def _first_error(exc: ValidationError, label: Callable[[str], str]) -> str:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"] if not isinstance(p, int)) or "value"
    message = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "missing":
        message = "missing"
    elif err["type"] == "extra_forbidden":
        message = "unknown key"
    return f"{label(field)}: {message}"


def offer_from(kind: str, values: Mapping[str, Any], *, label: Callable[[str], str]) -> Offer:
    """One offer from its keys (``kind`` cloud or on_prem); PriceError names the key through
    ``label`` (a flag, or the file and table)."""
    model: type[CloudOffer] | type[OnPremOffer] = CloudOffer if kind == "cloud" else OnPremOffer
    try:
        return model.model_validate(dict(values))
    except ValidationError as exc:
        raise PriceError(_first_error(exc, label)) from None


def _labeller(where: str) -> Callable[[str], str]:
    return lambda field: f"{where}.{field}"


def offers_from_table(table: Mapping[str, Any], *, source: str) -> list[Offer]:
    """The offers of a price file: arrays of tables ``[[cloud]]`` and ``[[on_prem]]``."""
    offers: list[Offer] = []
    for key, items in table.items():
        kind = key.replace("-", "_")
        if kind not in ("cloud", "on_prem"):
            raise PriceError(f"{source}: unknown table {key!r} (known: [[cloud]], [[on_prem]])")
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise PriceError(f"{source}: {key} must be an array of tables ([[{key}]])")
        for i, item in enumerate(items, start=1):
            values = {"name": f"{key} {i}" if len(items) > 1 else key, **item}
            offers.append(offer_from(kind, values, label=_labeller(f"{source}: {key}[{i}]")))
    if not offers:
        raise PriceError(f"{source}: no offer in it (a [[cloud]] or [[on_prem]] table)")
    return offers


# --- formulas over prices alone ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeYear:
    """What one on-prem node costs a year, $, by part."""

    capex: float
    """capex_per_node / years."""
    power: float
    """power_kw_per_node x pue x 8,760 h x power_price."""
    ops: float

    @property
    def total(self) -> float:
        return self.capex + self.power + self.ops

    @property
    def running(self) -> float:
        """Power and operations: what the node costs a year once bought."""
        return self.power + self.ops


def node_year(offer: OnPremOffer) -> NodeYear:
    return NodeYear(
        capex=offer.capex_per_node / offer.years,
        power=offer.power_kw_per_node * offer.pue * HOURS_PER_YEAR * offer.power_price,
        ops=offer.ops_per_year,
    )


def gpu_hour_usd(
    offer: CloudOffer | OnPremOffer, *, gpus_per_node: int, utilisation: float
) -> float:
    """$ per used GPU-hour: the cloud's price; on-prem, a node's year over the GPU-hours it is
    busy: node_year / (8,760 h x utilisation x gpus_per_node)."""
    if isinstance(offer, CloudOffer):
        return offer.gpu_hour
    return node_year(offer).total / (HOURS_PER_YEAR * utilisation * gpus_per_node)


def break_even_utilisation(cloud: CloudOffer, on_prem: OnPremOffer, *, gpus_per_node: int) -> float:
    """The utilisation above which on-prem costs less than the cloud: a node's year against
    the cloud's price of the same GPUs busy that share of the year,
    u* = node_year / (gpus_per_node x 8,760 h x gpu_hour).  Above 1: on-prem never does."""
    return node_year(on_prem).total / (gpus_per_node * HOURS_PER_YEAR * cloud.gpu_hour)


def break_even_months(
    cloud: CloudOffer, on_prem: OnPremOffer, *, gpus_per_node: int, utilisation: float
) -> float | None:
    """Months after which buying has cost less than renting, at ``utilisation``: the purchase
    paid back by what renting would cost beyond running the node,
    m* = capex_per_node / (gpu_hour x gpus_per_node x 730 h x utilisation - running / 12).
    None when renting costs no more than running a bought node (never)."""
    rent = cloud.gpu_hour * gpus_per_node * HOURS_PER_MONTH * utilisation
    running = node_year(on_prem).running / 12
    if rent <= running:
        return None
    return on_prem.capex_per_node / (rent - running)


COST_FILE = "cost.json"
"""The run folder's prices, as ``clusterbench cost`` keeps them."""


def read_request(run_dir: Path) -> CostRequest | None:
    """The request kept in ``run_dir/cost.json`` (None: no such file); ValueError, one line,
    for a file that cannot be read."""
    path = run_dir / COST_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return CostRequest.model_validate(json.loads(text).get("request", {}))
    except (ValueError, AttributeError, ValidationError) as exc:
        first = str(exc).splitlines()[0]
        raise ValueError(f"{path}: not a clusterbench cost.json ({first})") from None
