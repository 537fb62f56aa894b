"""The Mann-Whitney test ``compare`` uses, held to scipy's (which it replaces for speed)."""

from __future__ import annotations

import math
import random

import pytest
from scipy.stats import mannwhitneyu

from clusterbench.analyses.compare.mann_whitney import EXACT_MAX, mann_whitney_p


def _scipy(x: list[float], y: list[float]) -> float:
    return float(mannwhitneyu(x, y, alternative="two-sided").pvalue)


@pytest.mark.parametrize("seed", range(6))
def test_p_values_equal_scipys_exact_and_asymptotic_with_and_without_ties(seed: int) -> None:
    rng = random.Random(seed)
    exact = asymptotic = 0
    for _ in range(300):
        n1, n2 = rng.randint(1, 14), rng.randint(1, 25)
        if rng.random() < 0.5:  # continuous: no ties
            x = [rng.gauss(0, 1) for _ in range(n1)]
            y = [rng.gauss(rng.random() * 2, 1) for _ in range(n2)]
        else:  # a few distinct values: ties
            x = [float(rng.randint(0, 4)) for _ in range(n1)]
            y = [float(rng.randint(0, 5)) for _ in range(n2)]
        ties = len(set(x + y)) < n1 + n2
        if min(n1, n2) <= EXACT_MAX and not ties:
            exact += 1
        else:
            asymptotic += 1
        assert mann_whitney_p(x, y) == pytest.approx(_scipy(x, y), abs=1e-12), (x, y)
    assert exact > 50 and asymptotic > 50  # both methods were held to scipy's


def test_the_exact_p_of_fully_separated_samples() -> None:
    # 5 against 5, every base value below every new one: 2 arrangements of C(10, 5) are as
    # extreme (all below, all above)
    p = mann_whitney_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert p == pytest.approx(2 / math.comb(10, 5))
    assert mann_whitney_p([3.0, 3.0], [3.0, 3.0, 3.0]) == 1.0  # all tied: no evidence


def test_an_empty_sample_is_refused() -> None:
    with pytest.raises(ValueError, match="a value in each sample"):
        mann_whitney_p([], [1.0])
