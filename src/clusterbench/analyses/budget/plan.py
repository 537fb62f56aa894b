"""The plan of a run: each benchmark's expected seconds, and with a budget what is cut to fit.

Pure.  A benchmark's figure is its duration model's estimate of the settings about to run
(:mod:`clusterbench.durations`), calibrated by the nearest measured run of it: an
earlier run in the history on this host (whatever its settings), else the shipped timing
table (its suite's preset), as ``T_measured x model(settings) / model(settings_measured)``.
Where the settings are the measured run's, the figure is the measured time itself.

With a budget (``--budget``: the whole run, minus a reserve for starting the workers and
writing the results) each benchmark is allotted ``max(its smallest form, r x its estimate)``,
``r`` chosen so the allotments fill the budget; a benchmark with a ``time_budget_s`` of its
own is allotted that.  Each is then fitted to its allotment (:func:`~clusterbench.benchmarks.
budget.fit`), and its allotment is the deadline it stops at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from clusterbench.durations import DurationModel, Estimate, NodeFacts, Term, fit, smallest

__all__ = [
    "FINISH_S",
    "RESERVE_S",
    "PlanInput",
    "PlannedBenchmark",
    "Reference",
    "RunBudgetPlan",
    "finish_reserve_s",
    "make_plan",
    "reserve_s",
]

Source = Literal["history", "table", "model", "none"]

RESERVE_S = {"cpu": 30.0, "cuda": 30.0}
"""Seconds of a ``--budget`` kept for what is no benchmark: the command's start (importing
torch), starting and joining the workers, probing the node, writing results.json and the
report.  CPU: 28 s of a 36 s quick run and 34 s of a 56 s standard run on two workers of a
2-core VM shared with other work (2026-12-02); cuda: not yet measured (CUDA and NCCL
initialisation add to the CPU's)."""
FINISH_S = {"cpu": 6.0, "cuda": 8.0}
"""Of :data:`RESERVE_S`, the seconds after the last benchmark: gathering and writing the
results, the HTML report, the summary (CPU: 5 s of that quick run; cuda: not yet measured)."""
MIN_RESERVE_FRACTION = 0.6
"""The reserve never takes more than this share of the budget."""


def reserve_s(device_type: str, budget_s: float) -> float:
    """Seconds of ``budget_s`` kept for what is no benchmark."""
    return min(RESERVE_S.get(device_type, RESERVE_S["cuda"]), MIN_RESERVE_FRACTION * budget_s)


def finish_reserve_s(device_type: str, budget_s: float) -> float:
    """Of :func:`reserve_s`, the seconds kept after the last benchmark."""
    whole = RESERVE_S.get(device_type, RESERVE_S["cuda"])
    return reserve_s(device_type, budget_s) * FINISH_S.get(device_type, FINISH_S["cuda"]) / whole


@dataclass(frozen=True, kw_only=True, slots=True)
class Reference:
    """A measured run of one benchmark: its seconds, its settings and where it ran."""

    seconds: float
    settings: Any
    facts: NodeFacts
    source: Literal["history", "table"]
    label: str
    """``history, run <id>`` or ``table: 2 CPU ranks``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanInput:
    name: str
    settings: Any
    model: DurationModel | None
    facts: NodeFacts
    reference: Reference | None = None
    time_budget_s: float | None = None
    """Its own ``time_budget_s`` setting (None: none)."""
    expected_s: float | None = None
    """Without a model: the figure the history or the table gives these settings."""
    expected_source: Source = "none"


@dataclass(frozen=True, kw_only=True, slots=True)
class PlannedBenchmark:
    name: str
    settings: Any
    """The settings it runs with (fitted to its budget where one was set)."""
    expected_s: float | None
    source: Source
    terms: tuple[Term, ...] = ()
    budget_s: float | None = None
    """Its deadline (None: none)."""
    cuts: tuple[str, ...] = ()
    before_s: float | None = None
    """Expected seconds of the settings before the cuts (set only when something was cut)."""
    calibration: str = ""
    """``x0.8 by history, run <id>``: how the model's figure was scaled ('' where it was not)."""
    basis: str = ""
    """The measured run the figure was calibrated by (``table: 2 CPU ranks``); '' for none."""
    scaled: bool = False
    """The figure is the measured run's scaled by the model (other settings or world size),
    not the measured time itself."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunBudgetPlan:
    benchmarks: list[PlannedBenchmark] = field(default_factory=list)
    budget_s: float | None = None
    reserve_s: float = 0.0
    fits: bool = True
    """Every benchmark's smallest form fits its share (else the deadlines cut them short)."""

    @property
    def expected_s(self) -> float | None:
        known = [b.expected_s for b in self.benchmarks if b.expected_s is not None]
        return sum(known) if known else None


@dataclass(frozen=True, kw_only=True, slots=True)
class _Calibrated:
    factor: float
    source: Source
    label: str
    basis: str = ""


def _calibration(item: PlanInput) -> _Calibrated:
    ref, model = item.reference, item.model
    if ref is None or model is None:
        return _Calibrated(factor=1.0, source="model", label="")
    raw = model.estimate(ref.settings, ref.facts).seconds
    if raw <= 0 or ref.seconds <= 0:
        return _Calibrated(factor=1.0, source="model", label="")
    factor = ref.seconds / raw
    return _Calibrated(
        factor=factor, source=ref.source, label=f"x{factor:.2g} by {ref.label}", basis=ref.label
    )


def _estimate(item: PlanInput, settings: Any, cal: _Calibrated) -> Estimate:
    assert item.model is not None
    return item.model.estimate(settings, item.facts).scaled(cal.factor)


def make_plan(
    items: Sequence[PlanInput], *, budget_s: float | None = None, reserve_s: float = 0.0
) -> RunBudgetPlan:
    """The plan of ``items`` (in run order), fitted to ``budget_s`` where one is given, and
    each item to its own ``time_budget_s``."""
    cals = [_calibration(i) for i in items]
    now = [
        _estimate(i, i.settings, c).seconds if i.model else i.expected_s
        for i, c in zip(items, cals, strict=True)
    ]
    allot = _allotments(items, cals, now, budget_s=budget_s, reserve_s=reserve_s)
    planned = [
        _planned(item, cal, budget) for item, cal, budget in zip(items, cals, allot, strict=True)
    ]
    floors = _floors(items, cals)
    fits = budget_s is None or sum(floors) <= max(0.0, budget_s - reserve_s) + 1e-9
    fits = fits and all(
        b.budget_s is None or b.expected_s is None or b.expected_s <= b.budget_s * (1 + 1e-6)
        for b in planned
    )
    return RunBudgetPlan(
        benchmarks=planned,
        budget_s=budget_s,
        reserve_s=reserve_s if budget_s is not None else 0.0,
        fits=fits,
    )


def _floors(items: Sequence[PlanInput], cals: Sequence[_Calibrated]) -> list[float]:
    out = []
    for item, cal in zip(items, cals, strict=True):
        if item.time_budget_s is not None:
            out.append(item.time_budget_s)
        elif item.model is not None:
            out.append(smallest(item.model, item.settings, item.facts).seconds * cal.factor)
        else:
            out.append(item.expected_s or 0.0)
    return out


def _allotments(
    items: Sequence[PlanInput],
    cals: Sequence[_Calibrated],
    now: Sequence[float | None],
    *,
    budget_s: float | None,
    reserve_s: float,
) -> list[float | None]:
    """Each item's seconds: its own ``time_budget_s``; with ``budget_s`` the others share what
    is left, ``max(floor, r x estimate)``; else None."""
    fixed = [i.time_budget_s for i in items]
    if budget_s is None:
        return list(fixed)
    free = [k for k, f in enumerate(fixed) if f is None]
    left = max(0.0, budget_s - reserve_s - sum(f or 0.0 for f in fixed))
    floors = _floors(items, cals)
    unknown = [k for k in free if now[k] is None]
    share = left / len(free) if free else 0.0
    est = {k: float(now[k] or 0.0) for k in free if k not in unknown}
    left_known = max(0.0, left - share * len(unknown))
    out: list[float | None] = list(fixed)
    for k in unknown:
        out[k] = share
    for k, seconds in _share(est, {k: floors[k] for k in est}, left_known).items():
        out[k] = seconds
    return out


def _share(est: dict[int, float], floors: dict[int, float], total: float) -> dict[int, float]:
    """``max(floor, r x est)`` summing to ``total``: r by bisection (r may exceed 1: slack is
    spread in proportion); floors alone above ``total``: the floors scaled down to it."""
    if not est:
        return {}
    if sum(floors.values()) >= total:
        scale = total / sum(floors.values()) if sum(floors.values()) > 0 else 0.0
        return {k: floors[k] * scale for k in est}

    def spent(r: float) -> float:
        return sum(max(floors[k], r * est[k]) for k in est)

    low, high = 0.0, 1.0
    while spent(high) < total and high < 1e9:
        high *= 2
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if spent(mid) < total else (low, mid)
    return {k: max(floors[k], low * est[k]) for k in est}


def _planned(item: PlanInput, cal: _Calibrated, budget_s: float | None) -> PlannedBenchmark:
    if item.model is None:
        return PlannedBenchmark(
            name=item.name,
            settings=item.settings,
            expected_s=item.expected_s,
            source=item.expected_source,
            budget_s=budget_s,
        )
    if budget_s is None:
        est = _estimate(item, item.settings, cal)
        return PlannedBenchmark(
            name=item.name,
            settings=item.settings,
            expected_s=est.seconds,
            source=cal.source,
            terms=est.terms,
            calibration=cal.label,
            basis=cal.basis,
            scaled=_scaled(item, item.settings),
        )
    fitted = fit(item.model, item.settings, item.facts, budget_s / cal.factor)
    after = fitted.after.scaled(cal.factor)
    return PlannedBenchmark(
        name=item.name,
        settings=fitted.settings,
        expected_s=after.seconds,
        source=cal.source,
        terms=after.terms,
        budget_s=budget_s,
        cuts=fitted.cuts,
        before_s=fitted.before.seconds * cal.factor if fitted.cuts else None,
        calibration=cal.label,
        basis=cal.basis,
        scaled=_scaled(item, fitted.settings),
    )


def _scaled(item: PlanInput, settings: Any) -> bool:
    ref = item.reference
    if ref is None:
        return False
    same_world = (ref.facts.world_size, ref.facts.num_nodes) == (
        item.facts.world_size,
        item.facts.num_nodes,
    )
    return not (same_world and settings == ref.settings)
