"""The two-sided Mann-Whitney U test of two samples, as ``scipy.stats.mannwhitneyu`` computes it
by default (``method="auto"``): the exact distribution of U when either sample has at most 8
values and no value is tied, else the normal approximation with the tie correction and the
continuity correction.

``compare`` tests every figure's repeats with it; importing ``scipy.stats`` alone takes longer
(0.6 s on a 2-core machine) than the whole command should, so the few lines of the test live
here.  ``tests/unit/test_mann_whitney.py`` holds it to scipy's p-values.

Reference: Mann, H. B. and Whitney, D. R. (1947), "On a test of whether one of two random
variables is stochastically larger than the other", Ann. Math. Statist. 18(1); the tie
correction as in scipy's documentation of ``mannwhitneyu``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from functools import cache

__all__ = ["EXACT_MAX", "mann_whitney_p"]

EXACT_MAX = 8
"""The exact distribution when either sample has at most this many values (and no ties)."""


def mann_whitney_p(x: Sequence[float], y: Sequence[float]) -> float:
    """The two-sided p-value of the Mann-Whitney U test of ``x`` against ``y`` (each non-empty,
    no NaN)."""
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        raise ValueError("the Mann-Whitney test needs a value in each sample")
    ranks, ties = _ranks([*x, *y])
    u1 = sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    u = max(u1, n1 * n2 - u1)
    if min(n1, n2) <= EXACT_MAX and not ties:
        p = 2 * _exact_sf(round(u), n1, n2)
    else:
        p = 2 * _normal_sf(u, n1, n2, ties)
    return min(1.0, max(0.0, p))


def _ranks(values: list[float]) -> tuple[list[float], list[int]]:
    """Each value's rank (1-based, the mean rank of a tied group) and the size of every tied
    group of two or more."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        mean_rank = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[order[k]] = mean_rank
        i = j + 1
    ties = [c for c in Counter(values).values() if c > 1]
    return ranks, ties


def _exact_sf(u: int, n1: int, n2: int) -> float:
    """P(U >= u) when the two samples come from one distribution: the count of arrangements
    whose U is at least ``u`` over all C(n1 + n2, n1) of them."""
    counts = _u_counts(n1, n2)
    return sum(counts[u:]) / math.comb(n1 + n2, n1)


@cache
def _u_counts(n1: int, n2: int) -> tuple[int, ...]:
    """The number of arrangements of the two samples with U = 0, 1, ..., n1*n2: the
    coefficients of the Gaussian binomial [n1 + n2 choose m]_q = prod_{i=1..m} (1 - q^(n+i)) /
    (1 - q^i), m the smaller sample, n the larger (m multiplications and exact divisions)."""
    m, n = sorted((n1, n2))
    poly = [1]
    for i in range(1, m + 1):  # times (1 - q^(n+i))
        step = n + i
        grown = poly + [0] * step
        for k in range(len(grown) - 1, step - 1, -1):
            grown[k] -= grown[k - step]
        poly = grown
    for i in range(1, m + 1):  # divided by (1 - q^i): out[k] = p[k] + out[k-i]
        for k in range(i, len(poly)):
            poly[k] += poly[k - i]
    return tuple(poly[: m * n + 1])


def _normal_sf(u: float, n1: int, n2: int, ties: list[int]) -> float:
    """P(U >= u) by the normal approximation, with the tie and continuity corrections."""
    n = n1 + n2
    tie_term = sum(t**3 - t for t in ties)
    variance = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)))
    if variance <= 0:  # every value tied: no evidence either way
        return 0.5
    z = (u - n1 * n2 / 2 - 0.5) / math.sqrt(variance)
    return 0.5 * math.erfc(z / math.sqrt(2))
