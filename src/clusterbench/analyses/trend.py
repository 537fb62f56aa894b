"""A metric over recorded runs: selecting its series and finding where it moved beyond noise.

Pure functions over the history's points (:class:`clusterbench.history_db.MetricPoint`); no I/O.

The selector names one metric and narrows it::

    BENCHMARK.METRIC[KEY=VALUE,...]@HOST/DEVICE

    gemm.tflops_best                      every dtype, host and device
    gemm.tflops[dtype=bf16,m=8192]        params equal to these (compared as written in JSON)
    memory.bandwidth@node7                one host (shell-style wildcards: @node*)
    gemm.tflops_best@node7/cuda:3         one device of one host

A series is one (params, host, device) combination, its points one per run, oldest first.

**Change points** (:func:`change_points`), by binary segmentation on medians: in a stretch of
the series, the split that best separates two levels (least total absolute deviation of the
points from their side's median) is a change point when the median after it differs from the
median before it by more than **both**

- the practical limit (:func:`clusterbench.thresholds.practical_floor`: a fraction of the level
  before, ``regression_min_rel`` and on CPU workers ``regression_min_rel_cpu``, whose runs on a
  shared machine swing by tens of percent; for latencies and durations an absolute amount
  too), and
- ``regression_noise_sigmas`` times the run-to-run noise: the robust standard deviation of one
  run from the next, 1.4826 x median|x[i+1] - x[i]| / sqrt 2, over the stretch searched (at
  least the whole series'), which a level shift barely moves;

with at least 3 runs before the split and 2 from it on (one new run alone is not a level; that
is what ``clusterbench compare`` judges).  Both sides are then searched again the same way.  A
best split nearer an end than that is not moved inwards (it would mark the wrong run): the
runs beyond it are set aside and the rest searched.

Why this noise: the MAD of the few runs before a split underestimates their spread, and in
simulation called a change in about 20% of flat 5- and 10-run series with 10% noise.  With the
point-to-point noise, flat series of 5, 10, 20 and 50 runs with 10% normal noise got a change
point in 1.8%, 1.8%, 0.6% and 0% of 1000 seeds, with 2% noise (under the 5% limit) in 0.1%, 0,
0.1% and 0; a step of 10 runs at 100 to 10 at 50 under 10% noise was found at its place in
97% of them.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import math
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from clusterbench.history_db import MetricPoint
from clusterbench.history_tables import canonical_params
from clusterbench.thresholds import Thresholds, practical_floor

__all__ = [
    "MIN_AFTER",
    "MIN_BEFORE",
    "ChangePoint",
    "Selector",
    "Trend",
    "change_points",
    "parse_selector",
    "select",
    "trends",
]

MIN_BEFORE: Final = 3
"""Runs needed before a change point."""
MIN_AFTER: Final = 2
"""Runs needed from a change point on."""
MAD_TO_SIGMA: Final = 1.4826
"""1 / Phi^-1(3/4): the MAD of normal data times this is its standard deviation."""

SELECTOR_SYNTAX: Final = "BENCHMARK.METRIC[KEY=VALUE,...]@HOST/DEVICE (brackets and @ optional)"
_SELECTOR = re.compile(
    r"^(?P<benchmark>[A-Za-z0-9_\-]+)\.(?P<metric>[A-Za-z0-9_\-]+)"
    r"(?:\[(?P<params>[^\]]*)\])?"
    r"(?:@(?P<host>[^/]+)(?:/(?P<device>.+))?)?$"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Selector:
    """Which measurements a trend shows; see the module doc for the syntax."""

    benchmark: str
    metric: str
    params: dict[str, str] = field(default_factory=dict)
    host: str | None = None
    """A hostname or a shell-style pattern."""
    device: str | None = None

    @property
    def name(self) -> str:
        return f"{self.benchmark}.{self.metric}"


@dataclass(frozen=True, kw_only=True, slots=True)
class ChangePoint:
    """The series moved to a new level at point ``index`` (the first point of the new level)."""

    index: int
    before: float
    """Median of the points from the previous change point (or the start) up to ``index``."""
    after: float
    """Median of the points from ``index`` up to the next change point (or the end)."""
    noise: float
    """The run-to-run noise (robust standard deviation) the move was judged against."""

    @property
    def rel_change(self) -> float:
        """(after - before) / before; 0 when before is 0."""
        return (self.after - self.before) / self.before if self.before else 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class TrendPoint:
    run_id: str
    started: str
    value: float
    cv: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Trend:
    """One series: a metric with one set of params on one device of one host, over runs."""

    benchmark: str
    metric: str
    unit: str
    params: dict[str, Any]
    host: str
    device: str
    points: list[TrendPoint]
    """Oldest first, one a run."""
    change_points: list[ChangePoint]
    rel_floor: float
    abs_floor: float


def parse_selector(text: str) -> Selector:
    """``BENCHMARK.METRIC[KEY=VALUE,...]@HOST/DEVICE``; ValueError (one line) when malformed."""
    match = _SELECTOR.match(text.strip())
    if match is None:
        raise ValueError(f"bad selector {text!r}: expected {SELECTOR_SYNTAX}")
    params: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in (match["params"] or "").split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"bad selector {text!r}: {item!r} is not KEY=VALUE")
        params[key.strip()] = value.strip()
    return Selector(
        benchmark=match["benchmark"],
        metric=match["metric"],
        params=params,
        host=match["host"],
        device=match["device"],
    )


def param_text(value: Any) -> str:
    """A param value as a selector writes it: strings bare, everything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def select(points: Iterable[MetricPoint], selector: Selector) -> list[MetricPoint]:
    """The points the selector's params, host and device keep (its metric is not checked).

    ValueError (one line, naming what there is) when a filter keeps nothing."""
    kept = list(points)
    for key, wanted in selector.params.items():
        have = sorted({k for p in kept for k in p.params})
        if key not in have:
            raise ValueError(f"{selector.name} has no param {key!r} (it has: {', '.join(have)})")
        values = sorted({param_text(p.params[key]) for p in kept if key in p.params})
        kept = [p for p in kept if key in p.params and param_text(p.params[key]) == wanted]
        if not kept:
            raise ValueError(f"no {selector.name} with {key}={wanted} ({key} is one of: "
                             f"{', '.join(values)})")  # fmt: skip
    for attr, pattern in (("host", selector.host), ("device", selector.device)):
        if pattern is None:
            continue
        seen = sorted({getattr(p, attr) for p in kept})
        kept = [p for p in kept if fnmatch.fnmatchcase(getattr(p, attr), pattern)]
        if not kept:
            raise ValueError(f"no {selector.name} on {attr} {pattern!r} ({attr}s: "
                             f"{', '.join(seen)})")  # fmt: skip
    return kept


def trends(
    points: Iterable[MetricPoint], *, thresholds: Thresholds, last: int | None = None
) -> list[Trend]:
    """One :class:`Trend` per (params, host, device), each with its change points; ``last``:
    only each series' newest ``last`` runs."""
    groups: dict[tuple[str, str, str, str], list[MetricPoint]] = {}
    for p in points:
        groups.setdefault((canonical_params(p.params), p.host, p.device, p.unit), []).append(p)
    out = []
    for (_, host, device, unit), members in sorted(groups.items()):
        series = _one_a_run(members)
        if last is not None:
            series = series[-last:]
        rel_floor, abs_floor = practical_floor(unit, thresholds, device=device)
        found = change_points(
            [p.value for p in series],
            rel_floor=rel_floor,
            abs_floor=abs_floor,
            sigmas=thresholds.regression_noise_sigmas,
        )
        first = members[0]
        out.append(
            Trend(
                benchmark=first.benchmark,
                metric=first.metric,
                unit=unit,
                params=first.params,
                host=host,
                device=device,
                points=series,
                change_points=found,
                rel_floor=rel_floor,
                abs_floor=abs_floor,
            )
        )
    return out


def _one_a_run(members: list[MetricPoint]) -> list[TrendPoint]:
    """The series' points in run order; a run that measured it more than once gives its
    median."""
    by_run: dict[tuple[str, str], list[MetricPoint]] = {}
    for p in members:
        by_run.setdefault((p.started, p.run_id), []).append(p)
    return [
        TrendPoint(
            run_id=run_id,
            started=started,
            value=statistics.median(p.value for p in ps),
            cv=ps[0].cv if len(ps) == 1 else None,
        )
        for (started, run_id), ps in sorted(by_run.items())
    ]


def change_points(
    values: Sequence[float],
    *,
    rel_floor: float,
    abs_floor: float = 0.0,
    sigmas: float,
    min_before: int = MIN_BEFORE,
    min_after: int = MIN_AFTER,
) -> list[ChangePoint]:
    """Where ``values`` (oldest first) moved to a new level beyond both the practical limit
    (``rel_floor`` of the level before and ``abs_floor``) and ``sigmas`` x the noise; the rule
    is the module doc's.  Sorted by index."""
    xs = [float(v) for v in values]
    series_noise = _step_noise(xs)
    found: list[ChangePoint] = []
    stretches = [(0, len(xs))]
    while stretches:
        start, end = stretches.pop()
        if end - start < min_before + min_after:
            continue
        split = min(
            range(start + 1, end),
            key=lambda k: _abs_dev(xs[start:k]) + _abs_dev(xs[k:end]),
        )
        # The best split too near an end: those few runs are no level of their own (and a
        # split moved inwards to make room would mark the wrong run); search without them.
        if split < start + min_before:
            stretches.append((split, end))
            continue
        if split > end - min_after:
            stretches.append((start, split))
            continue
        before, after = xs[start:split], xs[split:end]
        level_before, level_after = statistics.median(before), statistics.median(after)
        noise = max(series_noise, _step_noise(xs[start:end]))
        move = abs(level_after - level_before)
        if move > rel_floor * abs(level_before) and move > abs_floor and move > sigmas * noise:
            found.append(
                ChangePoint(index=split, before=level_before, after=level_after, noise=noise)
            )
            stretches += [(start, split), (split, end)]
    return _relevel(sorted(found, key=lambda c: c.index), xs)


def _relevel(found: list[ChangePoint], xs: list[float]) -> list[ChangePoint]:
    """Each change point's levels as the medians between its neighbours (the search saw wider
    stretches when it found them)."""
    bounds = [0, *(c.index for c in found), len(xs)]
    return [
        ChangePoint(
            index=c.index,
            before=statistics.median(xs[bounds[i] : c.index]),
            after=statistics.median(xs[c.index : bounds[i + 2]]),
            noise=c.noise,
        )
        for i, c in enumerate(found)
    ]


def _abs_dev(xs: Sequence[float]) -> float:
    m = statistics.median(xs)
    return sum(abs(x - m) for x in xs)


def _step_noise(xs: Sequence[float]) -> float:
    # x[i+1] - x[i] of independent points with spread s has spread s*sqrt 2.
    if len(xs) < 3:
        return 0.0
    steps = [abs(b - a) for a, b in itertools.pairwise(xs)]
    return MAD_TO_SIGMA * statistics.median(steps) / math.sqrt(2)
