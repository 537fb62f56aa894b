"""How long a benchmark will take before it runs, and how it is made to fit a time budget.

Each benchmark declares a :class:`DurationModel` in its registration: ``estimate`` counts the
work its settings ask for (shapes, bytes, steps, sweep points, node-pair rounds) and turns it
into seconds with the rates of :class:`NodeFacts` (what this node measured in earlier runs, else
the GPU's spec, else a nominal rate named in the benchmark's ``duration`` module); ``cuts`` are
the steps that make the settings smaller, cheapest loss of information first.  :func:`fit`
applies them until the estimate fits.  Pure: no torch, the same answer on every rank.  It sits
below the registry (standard library only), so the declarations and the plan both read it.

The plan (``analyses/budget/plan.py``) calibrates each estimate by a measured run
of the benchmark (history, else the shipped timing table), so what an estimate must get right
is how the duration scales with the settings; the absolute rates matter only where nothing was
measured.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "Cut",
    "CutFn",
    "DurationModel",
    "Estimate",
    "EstimateFn",
    "FactQuery",
    "Fitted",
    "NodeFacts",
    "Rate",
    "Term",
    "drop_cut",
    "fit",
    "halve_cut",
    "halve_seconds_cut",
    "smallest",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class FactQuery:
    """One figure an estimate may use, as an earlier run on this node measured it: the median
    of ``metric``'s values of ``benchmark`` whose params include ``params``."""

    name: str
    """The fact's name in :attr:`NodeFacts.measured` (e.g. ``gemm_tflops_bf16``)."""
    benchmark: str
    metric: str
    params: Mapping[str, Any] = field(default_factory=dict)
    scale: float = 1.0
    """Multiplier into the fact's unit (e.g. 1e-3 for a metric in ms to seconds)."""
    pick: Literal["median", "max", "min"] = "median"
    """Which of the matching values: max for a bandwidth over a size sweep (its plateau)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeFacts:
    """What an estimate knows of the node and the run, before the benchmark starts."""

    device_type: str
    """'cuda' or 'cpu'."""
    world_size: int
    local_world_size: int
    num_nodes: int = 1
    gpu: str | None = None
    """The GPU model (NVML's name), where known."""
    spec_tflops: Mapping[str, float] = field(default_factory=dict)
    """Dense peak TFLOP/s per dtype of the GPU's spec sheet (empty: unknown)."""
    spec_memory_gbps: float | None = None
    """The GPU's memory bandwidth from its spec sheet."""
    measured: Mapping[str, float] = field(default_factory=dict)
    """Fact name -> its value in this node's newest earlier run that measured it (the history;
    :class:`FactQuery` says what each name is)."""

    @property
    def cuda(self) -> bool:
        return self.device_type == "cuda"

    @property
    def ranks_per_node(self) -> int:
        return max(1, self.local_world_size)

    def rate(self, name: str, *, nominal: float, spec: float | None = None) -> Rate:
        """The fact ``name`` as measured here, else ``spec`` (a spec sheet's figure, already
        derated by the caller), else ``nominal``."""
        value = self.measured.get(name)
        if value is not None and value > 0:
            return Rate(value, "measured")
        if spec is not None and spec > 0:
            return Rate(spec, "spec")
        return Rate(nominal, "nominal")


@dataclass(frozen=True, slots=True)
class Rate:
    value: float
    source: str
    """measured (this node, an earlier run), spec (the GPU's spec sheet) or nominal."""


@dataclass(frozen=True, slots=True)
class Term:
    """One part of an estimate: what is counted, and its seconds."""

    what: str
    seconds: float


@dataclass(frozen=True, kw_only=True, slots=True)
class Estimate:
    terms: tuple[Term, ...]
    points: int = 1
    """The units the benchmark can stop between (shapes, sizes, cases, grid points)."""

    @property
    def seconds(self) -> float:
        return sum(t.seconds for t in self.terms)

    def scaled(self, factor: float) -> Estimate:
        """Every term times ``factor`` (the plan's calibration by a measured run)."""
        terms = tuple(Term(t.what, t.seconds * factor) for t in self.terms)
        return Estimate(terms=terms, points=self.points)


@dataclass(frozen=True, kw_only=True, slots=True)
class Cut:
    """The settings one step smaller."""

    settings: Any
    key: str
    """The setting changed (``repeats``, ``shapes``)."""
    before: str
    after: str


EstimateFn = Callable[[Any, NodeFacts], Estimate]
"""``estimate(settings, facts)``."""
CutFn = Callable[[Any, NodeFacts], Cut | None]
"""``cut(settings, facts)``: the settings one step smaller, or None where this step can go no
further."""


@dataclass(frozen=True, kw_only=True, slots=True)
class DurationModel:
    """A benchmark's duration model, named in its registration."""

    estimate: EstimateFn
    cuts: tuple[CutFn, ...] = ()
    """Cheapest loss first: timed repeats down to a floor that still gives statistics, then
    warm-up, then sweep points at the edges, then sizes."""
    facts: tuple[FactQuery, ...] = ()
    """The figures of earlier runs ``estimate`` reads from :attr:`NodeFacts.measured`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Fitted:
    settings: Any
    cuts: tuple[str, ...]
    """What changed, one line per setting: ``repeats 30 -> 8``."""
    before: Estimate
    after: Estimate

    @property
    def changed(self) -> bool:
        return bool(self.cuts)


_MAX_STEPS = 200
"""Cut steps at most (every step makes the settings smaller; this only bounds a bad cut)."""


def fit(model: DurationModel, settings: Any, facts: NodeFacts, budget_s: float) -> Fitted:
    """``settings`` made to fit ``budget_s`` by ``model``'s estimate: the first cut step that
    still applies, again and again, until the estimate fits or no step applies (then the
    smallest form, which the benchmark's deadline stops at ``budget_s``)."""
    before = model.estimate(settings, facts)
    current, now = settings, before
    changed: dict[str, tuple[str, str]] = {}
    for _ in range(_MAX_STEPS):
        if now.seconds <= budget_s:
            break
        found = _first_saving(model, current, facts, now.seconds)
        if found is None:
            break
        step, now = found
        first = changed.get(step.key, (step.before, step.after))[0]
        changed[step.key] = (first, step.after)
        current = step.settings
    cuts = tuple(f"{key} {a} -> {b}" for key, (a, b) in changed.items() if a != b)
    return Fitted(settings=current, cuts=cuts, before=before, after=now)


def _first_saving(
    model: DurationModel, settings: Any, facts: NodeFacts, seconds: float
) -> tuple[Cut, Estimate] | None:
    """The first cut step (in order) that makes the estimate smaller: a step that saves
    nothing (a sweep list while the sweep is off) is not taken, so no cut is reported that
    changes nothing."""
    for cut in model.cuts:
        step = cut(settings, facts)
        if step is None:
            continue
        after = model.estimate(step.settings, facts)
        if after.seconds < seconds * (1 - 1e-9):
            return step, after
    return None


def smallest(model: DurationModel, settings: Any, facts: NodeFacts) -> Estimate:
    """The estimate of ``settings`` with every cut step applied (its floor)."""
    return fit(model, settings, facts, 0.0).after


# ----------------------------------------------------------------------------- cut steps


def halve_cut(
    key: str,
    *,
    floor: int | Callable[[NodeFacts], int],
    multiple: int = 1,
    label: Callable[[int], str] = str,
) -> CutFn:
    """Halve the integer setting ``key`` (rounding up to a ``multiple``), never below
    ``floor`` (a number, or one that depends on the node: ``lambda facts: ...``)."""

    def cut(settings: Any, facts: NodeFacts) -> Cut | None:
        value = int(getattr(settings, key))
        low = floor(facts) if callable(floor) else floor
        half = -(-value // 2)  # ceil
        new = max(low, -(-half // multiple) * multiple)
        if new >= value:
            return None
        smaller = _replaced(settings, key, new)
        if smaller is None:
            return None
        return Cut(settings=smaller, key=key, before=label(value), after=label(new))

    return cut


def halve_seconds_cut(key: str, *, floor: float) -> CutFn:
    """Halve the float setting ``key`` (a duration), never below ``floor``."""

    def cut(settings: Any, facts: NodeFacts) -> Cut | None:
        value = float(getattr(settings, key))
        new = max(floor, value / 2)
        if new >= value:
            return None
        smaller = _replaced(settings, key, new)
        if smaller is None:
            return None
        return Cut(settings=smaller, key=key, before=f"{value:g} s", after=f"{new:g} s")

    return cut


def drop_cut(
    key: str,
    *,
    keep: int = 1,
    order: Sequence[Any] | None = None,
    label: Callable[[Any], str] = str,
) -> CutFn:
    """Drop one element of the list setting ``key`` while more than ``keep`` remain: the first
    of ``order`` still in it, else the last.  The cut reads ``N -> M (dropped x)``."""

    def cut(settings: Any, facts: NodeFacts) -> Cut | None:
        items = list(getattr(settings, key))
        if len(items) <= keep:
            return None
        victim = next((x for x in order or () if x in items), items[-1])
        rest = [x for x in items if x != victim]
        new = _replaced(settings, key, rest)
        if new is None:
            return None
        return Cut(settings=new, key=key, before=_listed(items, label), after=_listed(rest, label))

    return cut


def _replaced(settings: Any, key: str, value: Any) -> Any:
    """``settings`` with ``key`` set to ``value``, or None where its own checks refuse it
    (another setting depends on it, e.g. a test hook naming a repeat)."""
    try:
        return dataclasses.replace(settings, **{key: value})
    except (ValueError, TypeError):
        return None


def _listed(items: Sequence[Any], label: Callable[[Any], str]) -> str:
    return "[" + ", ".join(label(x) for x in items) + "]"
