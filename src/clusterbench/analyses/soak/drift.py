"""Drift over a soak: each figure's series over the rounds, and whether it worsened.

A soak (``--soak``/``--repeat``) keeps every round's measurements.  A **series** is one figure
on one device over the rounds: (benchmark, metric, unit, identifying params, host, device),
its n-th occurrence in a round paired with the n-th of the others (as ``compare`` pairs them).

A series **drifted** when all of these hold (:func:`drift_of`):

- it has :data:`MIN_ROUNDS` rounds or more;
- its trend is monotone beyond chance: Kendall's tau of the figure against the round
  (the Mann-Kendall trend test, ``scipy.stats.kendalltau``) has p below
  ``thresholds.soak_drift_alpha``;
- its last rounds are worse than its first rounds (the medians of the first and of the last
  quarter of the rounds, at least one each; worse: lower where higher is better, higher where
  lower is better) by more than ``soak_drift_min_rel`` of the first, and for latencies and
  durations also by more than the absolute floor of
  :func:`~clusterbench.thresholds.practical_floor`;
- and by more than ``soak_drift_noise_sigmas`` times the rounds' noise: 1.4826 x the MAD of
  the change from one round to the next, about the median change, / sqrt 2.  The
  differences of white noise of standard deviation s have a spread of s sqrt 2; a steady
  trend only shifts their median, and one step moves one of them, so neither hides itself
  by inflating the noise (``history``'s change points use median|x[i+1] - x[i]|, which a
  trend does inflate: there a trend is what is searched for by other means).

How often (``scripts/soak_drift_rates.py``, 1000 seeds each, default thresholds): flat series of
6, 10 and 20 rounds with 3% normal noise were called a drift in 0.4%, 0.7% and 0%, of 10
rounds with 2% noise in 0.2%, with 1% in none; a steady fall of 1.5% a round under 1% noise
was found in 77% of 6-round soaks and in every 10-round one; a 10% step halfway under 2% noise
in 60% of 10-round and 95% of 20-round soaks.  Only a worsening counts, so an improvement is
never a drift.

The slope is Theil-Sen's (``scipy.stats.theilslopes``: the median of the pairwise slopes) of
the figure against the hours since the series' first measurement, in the figure's unit per
hour (per round when the measurements carry no time).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from clusterbench.analyses.compare.comparison import identity_params, params_key
from clusterbench.analyses.soak.telemetry import DeviceRounds, round_telemetry
from clusterbench.metrics import Direction, direction_of
from clusterbench.schema import Measurement, ParamValue, Results
from clusterbench.thresholds import Thresholds, practical_floor

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = [
    "MAD_TO_SIGMA",
    "MIN_ROUNDS",
    "Drift",
    "Series",
    "SoakAnalysis",
    "drift_of",
    "round_noise",
    "soak_analysis",
    "soak_drifts",
    "soak_series",
]

MIN_ROUNDS: Final = 5
"""Rounds a series needs before its trend is tested: Kendall's exact two-sided p of n rounds
is at least 2 / n!, 0.083 for 4 rounds, above any sensible alpha; 0.017 for 5."""
MAD_TO_SIGMA: Final = 1.4826
"""1 / Phi^-1(3/4): the MAD of normal data times this is its standard deviation."""
_SECONDS_PER_HOUR: Final = 3600.0


@dataclass(frozen=True, slots=True)
class Series:
    """One figure on one device over a soak's rounds (rounds in order)."""

    benchmark: str
    metric: str
    unit: str
    params: dict[str, ParamValue]
    host: str
    device: str
    direction: Direction | None
    rounds: tuple[int, ...]
    values: tuple[float, ...]
    times: tuple[float | None, ...]

    @property
    def name(self) -> str:
        return f"{self.benchmark}.{self.metric}"


@dataclass(frozen=True, slots=True)
class Drift:
    """A series' trend over the rounds, and whether it worsened beyond the limits."""

    series: Series
    first: float
    """Median of the first quarter of the rounds (at least one)."""
    last: float
    """Median of the last quarter of the rounds (at least one)."""
    change: float
    """(last - first) / |first|."""
    slope: float
    """Theil-Sen slope, in the unit per hour (per round when :attr:`per_hour` is False)."""
    per_hour: bool
    tau: float
    p_value: float
    noise: float
    """The rounds' noise, in the figure's unit (see the module doc)."""
    worse: bool
    """The last rounds are worse than the first ones (whatever the size of the change)."""
    drifted: bool


def soak_series(results: Results) -> list[Series]:
    """Every series of the soak's measurements (those with a round), in first-seen order."""
    groups: dict[tuple[str, ...], list[Measurement]] = defaultdict(list)
    for key, m in _keyed([m for m in results.measurements if m.round is not None]):
        groups[key].append(m)
    out = []
    for ms in groups.values():
        ms.sort(key=lambda m: m.round or 0)
        head = ms[0]
        out.append(
            Series(
                benchmark=head.benchmark,
                metric=head.metric,
                unit=head.unit,
                params=identity_params(head),
                host=head.host,
                device=head.device,
                direction=direction_of(head),
                rounds=tuple(m.round or 0 for m in ms),
                values=tuple(m.value for m in ms),
                times=tuple(m.time for m in ms),
            )
        )
    return out


def _keyed(ms: Sequence[Measurement]) -> list[tuple[tuple[str, ...], Measurement]]:
    """Each measurement with its series key: the n-th of a key within a round is series n."""
    seen: dict[tuple[object, ...], int] = defaultdict(int)
    out: list[tuple[tuple[str, ...], Measurement]] = []
    for m in ms:
        key = (m.benchmark, m.metric, m.unit, params_key(identity_params(m)), m.host, m.device)
        n = seen[(*key, m.round)]
        seen[(*key, m.round)] = n + 1
        out.append(((*key, str(n)), m))
    return out


def round_noise(values: Sequence[float]) -> float:
    """The rounds' noise: 1.4826 x MAD of the round-to-round changes / sqrt 2 (module doc)."""
    if len(values) < 3:
        return 0.0
    diffs = [b - a for a, b in itertools.pairwise(values)]
    centre = statistics.median(diffs)
    return MAD_TO_SIGMA * statistics.median(abs(d - centre) for d in diffs) / math.sqrt(2)


def drift_of(series: Series, thresholds: Thresholds) -> Drift | None:
    """The trend of ``series``; None with fewer than :data:`MIN_ROUNDS` rounds, or when it
    does not change at all (no trend to test)."""
    from scipy import stats as scipy_stats

    values = list(series.values)
    n = len(values)
    if n < MIN_ROUNDS or len(set(values)) == 1:
        return None
    k = max(1, math.ceil(n / 4))
    first, last = statistics.median(values[:k]), statistics.median(values[-k:])
    tau, p_value = scipy_stats.kendalltau(list(series.rounds), values)
    if not (math.isfinite(tau) and math.isfinite(p_value)):
        return None
    slope, per_hour = _slope(series)
    noise = round_noise(values)
    change = (last - first) / abs(first) if first else math.inf
    direction = series.direction
    worse = (direction == "higher" and last < first) or (direction == "lower" and last > first)
    # the soak's own relative limit applies, on GPUs and CPU workers alike; the floor of
    # latencies and durations is the one compare and history use
    _, floor = practical_floor(series.unit, thresholds, device=series.device)
    beyond = (
        abs(change) > thresholds.soak_drift_min_rel
        and abs(last - first) > floor
        and abs(last - first) > thresholds.soak_drift_noise_sigmas * noise
        and p_value < thresholds.soak_drift_alpha
        and (tau < 0) == (last < first)
    )
    return Drift(series=series, first=first, last=last, change=change, slope=slope,
                 per_hour=per_hour, tau=float(tau), p_value=float(p_value), noise=noise,
                 worse=worse, drifted=worse and beyond)  # fmt: skip


def _slope(series: Series) -> tuple[float, bool]:
    """Theil-Sen slope per hour of the series' own clock, and True; per round and False when
    its measurements carry no time."""
    from scipy import stats as scipy_stats

    times = [t for t in series.times if t is not None]
    if len(times) == len(series.times) and len(set(times)) > 1:
        hours = [(t - times[0]) / _SECONDS_PER_HOUR for t in times]
        return float(scipy_stats.theilslopes(series.values, hours)[0]), True
    rounds = [float(r) for r in series.rounds]
    return float(scipy_stats.theilslopes(series.values, rounds)[0]), False


def soak_drifts(results: Results, thresholds: Thresholds) -> list[Drift]:
    """The trend of every series that has one (:func:`drift_of`), in first-seen order."""
    return [d for s in soak_series(results) if (d := drift_of(s, thresholds)) is not None]


@dataclass(frozen=True, slots=True)
class SoakAnalysis:
    """A soak's rounds analysed once: what its findings, section and figures read."""

    series: tuple[Series, ...]
    """Every series, in first-seen order."""
    drifts: tuple[Drift | None, ...]
    """Each series' trend (:func:`drift_of`), in the order of :attr:`series`."""
    telemetry: tuple[DeviceRounds, ...]
    """Every GPU's telemetry by round (none without telemetry)."""


def soak_analysis(results: Results, run: RunView) -> SoakAnalysis | None:
    """The soak run part's analysis of every round (None outside a soak)."""
    if results.run.soak is None:
        return None
    series = soak_series(results)
    drifts = tuple(drift_of(s, run.thresholds) for s in series)
    return SoakAnalysis(tuple(series), drifts, tuple(round_telemetry(results)))
