"""The noise model of a comparison (analyses/compare/noise.py): Student's t tail, spreads, Simes and
Benjamini-Hochberg, held to scipy and to hand-worked cases."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats

from clusterbench.analyses.compare.noise import (
    GROUP_MIN,
    bh_cutoff,
    group_spread,
    log_spread,
    simes_p,
    t_two_sided_p,
)
from clusterbench.analyses.compare.rule import Judged, control_false_alarms


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 8, 19, 30])
@pytest.mark.parametrize("t", [0.0, 0.3, 1.0, 2.0, 4.3, 10.0, 60.0])
def test_t_tail_is_scipys(t: float, df: int) -> None:
    expected = 2 * stats.t.sf(t, df)
    assert t_two_sided_p(t, df) == pytest.approx(expected, rel=1e-3, abs=1e-12)
    assert t_two_sided_p(-t, df) == t_two_sided_p(t, df)


def test_t_tail_worked_values_and_bad_df() -> None:
    assert t_two_sided_p(4.303, 2) == pytest.approx(0.05, abs=1e-4)  # the table's 95% point
    assert t_two_sided_p(1.0, 1) == pytest.approx(0.5)  # Cauchy: P(|X| > 1) = 1/2
    assert t_two_sided_p(math.inf, 3) == 0.0
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_two_sided_p(1.0, 0)


def test_log_spread_takes_the_one_that_strayed() -> None:
    assert log_spread([1.0, 1.0]) is None  # fewer than 3
    assert log_spread([1.0, -1.0, 2.0]) is None  # a value <= 0 has no log
    values = [0.10, 0.065, 0.10]
    assert log_spread(values) == pytest.approx(stats.tstd([math.log(v) for v in values]))
    assert log_spread([2.0, 2.0, 2.0]) == 0.0


def test_group_spread_covers_the_spikes_of_its_kind() -> None:
    rng = random.Random(7)
    calm = [[100 * math.exp(rng.gauss(0, 0.02)) for _ in range(4)] for _ in range(30)]
    spread = group_spread(calm)
    assert spread is not None and spread.strays == 120
    assert 0.015 < spread.spread < 0.045  # about the 2% drawn, stray from a median of 3
    # one value in eight spikes 10x (a busy CPU's collectives): the kind's spread takes them in
    spiky = [list(v) for v in calm]
    for values in spiky[::2]:
        values[rng.randrange(4)] *= 10
    wide = group_spread(spiky)
    assert wide is not None and wide.spread > 0.5
    assert group_spread(calm[: GROUP_MIN // 4 - 1]) is None  # too few strays


def test_simes_and_bh_against_hand_worked_cases() -> None:
    assert simes_p([0.01, 0.04, 0.5]) == pytest.approx(min(3 * 0.01, 3 * 0.04 / 2, 0.5))
    p = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216]
    # at q = 0.05: 0.008 <= 0.05 x 2 / 10, 0.039 > 0.015 ... none beyond rank 2 passes
    assert bh_cutoff(p, 0.05) == 0.008
    assert bh_cutoff([0.5, 0.9], 0.05) == -1.0


def _judged(p: float) -> Judged:
    return Judged(verdict="regression", change=-0.5, severity="fail", p_value=p, noise="n")


def test_false_alarms_held_over_families() -> None:
    # 200 rows of noise (uniform p) in 20 families: with nothing changed nothing passes
    rng = random.Random(3)
    noise = [_judged(rng.random()) for _ in range(200)]
    families = [i // 10 for i in range(200)]
    held = control_false_alarms(noise, 0.01, families)
    assert all(j.verdict == "unchanged" and j.reason == "inside_noise" for j in held)
    assert "false alarms held at 1% over 200 rows" in held[0].noise
    # one family moved together (a slow GEMM): each row p = 3e-4, found as a family
    moved = [_judged(3e-4) for _ in range(10)] + noise[10:]
    held = control_false_alarms(moved, 0.01, families)
    assert [j.verdict for j in held[:10]] == ["regression"] * 10
    assert sum(j.verdict == "regression" for j in held[10:]) == 0
    assert held[0].noise.endswith("false alarms held at 1% over 200 rows")
    # one row alone at that p among the noise of its family and the others': not enough
    alone = [_judged(3e-4), *noise[1:]]
    held = control_false_alarms(alone, 0.01, families)
    assert sum(j.verdict == "regression" for j in held) == 0
    # rows without a p-value (a known-good figure) pass through as they were
    known = Judged(verdict="regression", change=-0.5, severity="fail", noise="below")
    assert control_false_alarms([known, *noise[1:]], 0.01, families)[0] == known
