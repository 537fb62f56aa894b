"""The noise model of a comparison: how far one figure strays from run to run, and how many
false alarms a comparison of hundreds of figures may raise.

A figure's run-to-run noise is the spread of its logarithm over earlier comparable runs
(:func:`log_spread`), and never less than the spread of its kind (:func:`group_spread`: every
figure of one metric on one device, e.g. the 120 collective latencies of one CPU worker):
four runs of one figure say little about its tails, where a hundred figures of its kind have
seen them.  The change of a figure is then a Student t statistic with ``k - 1`` degrees of
freedom over its ``k`` earlier values (:func:`t_two_sided_p`), and the false alarms over all
rows of one comparison are held by the Benjamini-Hochberg procedure (:func:`bh_cutoff`): with
nothing changed, the chance that a comparison reports any change is at most ``q``.

References: Student (1908), "The probable error of a mean", Biometrika 6(1) (the t
distribution; its tail in closed form for whole degrees of freedom as in Abramowitz and Stegun,
*Handbook of Mathematical Functions*, 26.7.3-26.7.4); Benjamini, Y. and Hochberg, Y. (1995),
"Controlling the false discovery rate", J. R. Statist. Soc. B 57(1).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "GROUP_MIN",
    "GROUP_QUANTILE",
    "MAD_TO_SIGMA",
    "KindSpread",
    "bh_cutoff",
    "group_spread",
    "log_spread",
    "simes_p",
    "t_two_sided_p",
]

MAD_TO_SIGMA = 1.4826
"""MAD x this = the standard deviation of normally distributed data (a robust sigma)."""
GROUP_MIN = 20
"""Strays (one figure's value in one earlier run) a kind of figure needs for its spread."""
GROUP_QUANTILE = 0.95
"""The share of a kind's strays its spread covers as 1.96 sigmas: a quantile, not a MAD, so
that the spikes a busy machine gives one figure in ten (a 10x collective latency on CPU) are
in the spread, not alarms."""


def t_two_sided_p(t: float, df: int) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` (>= 1) degrees of freedom, in closed form."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be 1 or more, got {df}")
    if math.isinf(t):
        return 0.0
    theta = math.atan(abs(t) / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    s = math.sin(theta)
    if df % 2 == 1:
        # A(t|df) = 2/pi (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...)), df odd
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for i in range(1, (df - 1) // 2):
            term *= c2 * (2 * i) / (2 * i + 1)
            total += term
        inside = (2 / math.pi) * (theta + s * math.cos(theta) * total)
    else:
        # A(t|df) = sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...), df even
        term, total = 1.0, 1.0
        for i in range(1, df // 2):
            term *= c2 * (2 * i - 1) / (2 * i)
            total += term
        inside = s * total
    return min(1.0, max(0.0, 1.0 - inside))


def _logs(values: Iterable[float]) -> list[float] | None:
    values = list(values)
    if not values or any(v <= 0 or math.isnan(v) for v in values):
        return None
    return [math.log(v) for v in values]


def log_spread(values: Sequence[float], *, min_values: int = 3) -> float | None:
    """The standard deviation of ``log(values)`` (a relative spread: 0.1 is about 10%): the
    larger of 1.4826 x MAD and the sample standard deviation, so that with few runs the one
    that strayed counts (two of three alike give a MAD of 0).  None for fewer than
    ``min_values`` values or any value <= 0."""
    logs = _logs(values)
    if logs is None or len(logs) < min_values:
        return None
    centre = statistics.median(logs)
    mad = statistics.median(abs(v - centre) for v in logs)
    return max(MAD_TO_SIGMA * mad, statistics.stdev(logs))


@dataclass(frozen=True, slots=True)
class KindSpread:
    """The run-to-run spread of a kind of figure and the strays it was taken from."""

    spread: float
    strays: int


def group_spread(histories: Iterable[Sequence[float]], *, min_values: int = 3) -> KindSpread | None:
    """The run-to-run spread of a kind of figure: for every figure with ``min_values`` or more
    earlier values, how far each value's log strays from the median of the others'; the
    :data:`GROUP_QUANTILE` of those strays / 1.96.  None with fewer than :data:`GROUP_MIN`."""
    strays: list[float] = []
    for values in histories:
        logs = _logs(values)
        if logs is None or len(logs) < min_values:
            continue
        for j, value in enumerate(logs):
            strays.append(abs(value - statistics.median(logs[:j] + logs[j + 1 :])))
    if len(strays) < GROUP_MIN:
        return None
    strays.sort()
    at = GROUP_QUANTILE * (len(strays) - 1)
    low = math.floor(at)
    high = min(low + 1, len(strays) - 1)
    quantile = strays[low] + (strays[high] - strays[low]) * (at - low)
    return KindSpread(quantile / 1.96, len(strays))


def bh_cutoff(p_values: Sequence[float], q: float) -> float:
    """The Benjamini-Hochberg cutoff: the largest p_(i) with p_(i) <= q i / m over the ``m``
    p-values sorted; a p-value at or below it is a discovery.  -1.0 when there is none (no
    p-value passes)."""
    m = len(p_values)
    cutoff = -1.0
    for i, p in enumerate(sorted(p_values), start=1):
        if p <= q * i / m:
            cutoff = p
    return cutoff


def simes_p(p_values: Sequence[float]) -> float:
    """The Simes combination of a family's p-values: min over i of m p_(i) / i, a valid p-value
    that the family holds no change (Simes 1986, Biometrika 73(3))."""
    m = len(p_values)
    return min(1.0, min(m * p / i for i, p in enumerate(sorted(p_values), start=1)))
