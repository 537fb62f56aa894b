"""The peer statistics an outlier is judged by: robust z-scores (median and scaled MAD), a
measurement's own repeat spread, and the noise limit a gap must exceed.  A member of a group of
peers that did the same work is an outlier when it is worse than the peers' median by all of
``mads`` scaled MADs, ``min_rel`` of the median and ``sigmas`` times the repeats' spread
(:func:`noise_limit`).

Groups of fewer than :data:`MIN_PEERS` members are never judged: the MAD of two values is half
their distance, so each of the two is exactly 0.67 scaled MADs from their median whatever the
gap, and "which one is slow" has no answer.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

from clusterbench.metrics import Direction
from clusterbench.schema import Measurement
from clusterbench.thresholds import Thresholds

__all__ = [
    "MIN_PEERS",
    "SCALED_MAD",
    "SPREAD_SIGMAS",
    "log_spread",
    "noise_limit",
    "outside_noise",
    "pooled_cv",
    "repeat_cv",
    "robust_outliers",
    "robust_zscores",
    "worse_log_ratio",
    "zscore",
]

SCALED_MAD = 1.4826
"""MAD x 1.4826 estimates the standard deviation of normal data (Rousseeuw & Croux, 1993)."""
MIN_PEERS = 3
"""Fewest distinct devices (or pairs) in a group for its outliers to mean anything."""
SPREAD_SIGMAS = Thresholds().outlier_spread_sigmas
"""The default of ``sigmas``: how many repeat spreads a member must be worse by."""

K = TypeVar("K", bound=Hashable)


def robust_zscores(values: Sequence[float]) -> list[float]:
    """``(v - median) / (1.4826 x MAD)`` per value.

    With a MAD of 0 (most values equal) a value at the median scores 0 and any other +-inf.
    """
    if not values:
        return []
    median = statistics.median(values)
    scale = SCALED_MAD * statistics.median(abs(v - median) for v in values)
    return [zscore(v - median, scale) for v in values]


def repeat_cv(m: Measurement) -> float | None:
    """A measurement's own spread: the coefficient of variation of its repeats, None with fewer
    than two repeats (back-to-back timings, a one-interval iperf3 test, no stats)."""
    stats = m.stats
    if stats is None or stats.samples < 2 or not math.isfinite(stats.cv) or stats.cv < 0:
        return None
    return stats.cv


def pooled_cv(cvs: Iterable[float | None]) -> float | None:
    """The pooled spread of the known CVs, ``sqrt(mean(cv^2))`` (the pooled standard deviation
    of members with as many repeats each); None when none is known.  Pooling steadies the
    estimate: two repeats of one member may agree by chance, those of six rarely all do."""
    known = [cv for cv in cvs if cv is not None]
    return math.sqrt(statistics.fmean(cv * cv for cv in known)) if known else None


def log_spread(cv: float) -> float:
    """The standard deviation of ``ln(value)`` of a positive measurement whose repeats vary by
    ``cv``: ``sqrt(ln(1 + cv^2))`` (exact for log-normal noise, ~cv for small cv).  A rate's
    noise is a factor, so gaps are compared as log ratios: a pair at 1% of the median is as far
    outside a 30% spread as one at 50% is outside a 5% spread."""
    return math.sqrt(math.log1p(cv * cv))


def noise_limit(own_cv: float | None, peers_cv: float | None, *, sigmas: float) -> float:
    """The log ratio to the peers' median a member must exceed to be outside the noise of the
    repeats: ``sigmas x sqrt(s_own^2 + s_peers^2)``, :func:`log_spread` of the member's CV and
    of the peers' :func:`pooled_cv`.  The member's own spread counts as at least the peers':
    a member without repeats, or whose few repeats happened to agree, is as noisy as the
    measurements around it.  0 when no spread is known at all.

    Both spreads are those of one repeat, not of the mean of the repeats (``cv / sqrt(n)``):
    measurements taken at different times (pairs in turn, ranks sharing cores) differ by about
    what their own repeats do, not by the far smaller standard error of each mean."""
    if peers_cv is None:
        return 0.0
    own = log_spread(max(own_cv or 0.0, peers_cv))
    return sigmas * math.hypot(own, log_spread(peers_cv))


def worse_log_ratio(value: float, median: float, *, better: Direction) -> float:
    """How many times worse than ``median`` ``value`` is, as a natural log (<= 0: not worse);
    ``+inf`` for a rate of 0 or below against a positive median."""
    if median <= 0:
        return 0.0
    if value <= 0:
        return math.inf if better == "higher" else -math.inf
    ratio = median / value if better == "higher" else value / median
    return math.log(ratio)


def robust_outliers(
    values: Mapping[K, float],
    *,
    mads: float,
    min_rel: float,
    better: Direction,
    spread: Mapping[K, float | None] | None = None,
    sigmas: float = SPREAD_SIGMAS,
) -> list[K]:
    """The keys whose value is worse than the median of all by more than ``mads`` scaled MADs,
    by at least ``min_rel`` of the median and, where ``spread`` gives the CV of a key's repeats,
    by more than :func:`noise_limit` (``sigmas`` spreads, its own and the keys' pooled CV);
    ``better`` says which way is better.  Fewer than :data:`MIN_PEERS` values, or a median of
    0, judge nothing."""
    if len(values) < MIN_PEERS:
        return []
    keys = list(values)
    xs = [values[k] for k in keys]
    median = statistics.median(xs)
    if median == 0:
        return []
    spread = spread or {}
    peers_cv = pooled_cv(spread.get(k) for k in keys)
    sign = 1.0 if better == "lower" else -1.0  # positive deviations are worse
    return [
        k
        for k, x, z in zip(keys, xs, robust_zscores(xs), strict=True)
        if sign * z > mads
        and sign * (x - median) / abs(median) >= min_rel
        and outside_noise(x, median, spread.get(k), peers_cv, better=better, sigmas=sigmas)
    ]


def outside_noise(
    value: float,
    median: float,
    own_cv: float | None,
    peers_cv: float | None,
    *,
    better: Direction,
    sigmas: float,
) -> bool:
    """``value`` is worse than ``median`` beyond :func:`noise_limit` (always, when no spread is
    known: then only the MAD and ``min_rel`` judge)."""
    limit = noise_limit(own_cv, peers_cv, sigmas=sigmas)
    return limit == 0 or worse_log_ratio(value, median, better=better) > limit


def zscore(deviation: float, scale: float) -> float:
    """``deviation / scale``; with a scale of 0, 0 for no deviation and +-inf for any other."""
    if scale > 0:
        return deviation / scale
    return 0.0 if deviation == 0 else math.copysign(math.inf, deviation)
