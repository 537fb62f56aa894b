"""The small solvers the prediction fits with and the t quantile of its intervals, held to
scipy's (which they replace so that the commands reading a run do not import scipy)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import optimize

from clusterbench.analyses.prediction.comm_model import nonnegative_least_squares
from clusterbench.analyses.prediction.scaling_model import golden_section_min


@pytest.mark.parametrize("seed", range(5))
def test_nonnegative_least_squares_equals_scipys_bounded_solver(seed: int) -> None:
    rng = np.random.default_rng(seed)
    at_bound = 0
    for _ in range(200):
        n = int(rng.integers(2, 12))
        design = np.abs(rng.normal(size=(n, 2))) + 0.01
        truth = rng.normal(size=2)  # often negative: the bound holds one of them at 0
        target = design @ truth + rng.normal(scale=0.3, size=n)
        ours = nonnegative_least_squares(design, target)
        theirs = optimize.lsq_linear(design, target, bounds=(0.0, np.inf), method="bvls").x
        at_bound += bool((theirs <= 1e-12).any())
        assert ours == pytest.approx(theirs, abs=1e-9), (design, target)
    assert at_bound > 20  # the bound was active often enough to be tested


def test_nonnegative_least_squares_wants_two_columns() -> None:
    with pytest.raises(ValueError, match="two columns"):
        nonnegative_least_squares(np.ones((3, 3)), np.ones(3))


@pytest.mark.parametrize("seed", range(3))
def test_golden_section_finds_scipys_bounded_minimum(seed: int) -> None:
    rng = random.Random(seed)
    same = 0
    for _ in range(60):
        upper = 10 ** rng.uniform(-4, 1)
        targets = [rng.uniform(0.1, 1.0) * upper for _ in range(3)]
        comm = [rng.uniform(0, 0.5) * upper for _ in range(3)]

        def loss(c: float, targets: list[float] = targets, comm: list[float] = comm) -> float:
            # step = compute + the part of communication not hidden, relative to the measured
            return sum(
                (max(c, 0.4 * c + k) / t - 1) ** 2 for t, k in zip(targets, comm, strict=True)
            )

        ours = golden_section_min(loss, upper * 1e-9, upper, xatol=upper * 1e-12)
        theirs = optimize.minimize_scalar(
            loss, bounds=(upper * 1e-9, upper), method="bounded",
            options={"xatol": upper * 1e-12},
        ).x  # fmt: skip
        # never worse than scipy's local search; where scipy's is the global minimum (its loss
        # within 1e-9 of a fine scan's), the same point
        assert loss(ours) <= loss(theirs) * (1 + 1e-9) + 1e-18
        scan = min(loss(upper * 1e-9 * (1e9 ** (i / 4000))) for i in range(4001))
        if loss(theirs) <= scan * (1 + 1e-9):
            same += 1
            assert math.isclose(ours, theirs, rel_tol=1e-5, abs_tol=upper * 1e-8)
    assert same > 30


@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.99, 0.999])
def test_student_t_quantile_equals_scipys(confidence: float) -> None:
    from scipy import stats

    from clusterbench.analyses.prediction.comm_model import student_t_quantile

    for dof in [*range(1, 40), 99, 100, 500]:
        ours = student_t_quantile(dof, confidence)
        assert ours == pytest.approx(stats.t.ppf(0.5 + confidence / 2, dof), rel=1e-10), dof
    with pytest.raises(ValueError, match="integer >= 1"):
        student_t_quantile(0, confidence)
