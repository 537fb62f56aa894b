"""The decision of one compared figure: a regression, an improvement, or unchanged.

A change counts only when it is beyond **both** limits:

1. the practical limit of its unit (:func:`clusterbench.thresholds.practical_floor`: a fraction,
   e.g. 5%, and for latencies and durations an absolute floor as well; CPU workers a larger
   fraction, ``regression_min_rel_cpu``);
2. the noise, from every estimate there is, each one exceeded:

   - within-run: a two-sided Mann-Whitney U test of the two runs' repeat samples
     (``Stats.values``) gives p < ``regression_alpha``.  It counts only where it can: both
     runs with at least 3 samples, and enough of them that p can reach alpha at all (the
     smallest p of sizes n1, n2 is 2 / C(n1 + n2, n1): 0.1 for 3 against 3, 0.008 for 5
     against 5);
   - run-to-run: with 3 or more earlier comparable runs, ``|change|`` beyond
     ``regression_noise_sigmas`` x 1.4826 x MAD of their values, relative to their median (of
     fewer than 10 runs, or their standard deviation where that is larger:
     :func:`robust_spread`); against a fleet baseline of 3 or more figures, the same with the
     baseline's spread.

   Without any estimate the noise is unknown and the row stays ``unchanged`` with a note that
   says so.  The within-run test alone misses how much the next run differs: on GPUs it
   counts only beyond ``regression_min_rel_unknown`` (15%), and on CPU workers, whose
   run-to-run swings dwarf the repeats' spread (``Thresholds.regression_min_rel_cpu``), not
   at all: a run-to-run estimate is required.  A built-in known-good figure needs no noise
   estimate: it is what a healthy GPU of that model reaches, so the practical limit below it
   is the rule.

Metrics with no better side (``Metric.better == "none"``: ratios, shares, counts) are shown,
never judged.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from clusterbench.analysis.rank_test import mann_whitney_p
from clusterbench.metrics import Direction
from clusterbench.thresholds import Thresholds, practical_floor

__all__ = [
    "FEW_RUNS",
    "MAD_TO_SIGMA",
    "MIN_RUNS",
    "MIN_SAMPLES",
    "Judged",
    "Reason",
    "Verdict",
    "judge",
    "robust_spread",
]

Verdict = Literal["regression", "improvement", "unchanged", "new", "missing"]
Reason = Literal["within_limit", "inside_noise", "noise_unknown", "not_judged"]
"""Why a row is ``unchanged``: inside the practical limit, beyond it but inside the noise,
beyond it with no estimate of the noise, or not judged (no better side, a base of 0)."""
MIN_SAMPLES = 3
"""Repeats each run needs before the within-run test applies."""
MIN_RUNS = 3
"""Earlier runs (or baseline figures) needed before the run-to-run noise is known."""
MAD_TO_SIGMA = 1.4826
"""MAD x this = the standard deviation of normally distributed data (a robust sigma)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Judged:
    verdict: Verdict
    change: float | None
    """(new - base) / |base|; None when base is 0."""
    severity: Literal["warn", "fail"] | None = None
    p_value: float | None = None
    noise: str = ""
    """How the noise was judged, or why the row was not judged."""
    reason: Reason | None = None
    """Why it is ``unchanged`` (None otherwise)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Noise:
    beyond: bool | None
    """True: beyond this estimate; False: inside it; None: no estimate."""
    note: str


FEW_RUNS = 10
"""Below this many values the spread is also their sample standard deviation (the larger)."""


def robust_spread(values: Sequence[float]) -> float | None:
    """1.4826 x MAD / |median| of ``values`` (a relative robust sigma); None for fewer than
    :data:`MIN_RUNS` values or a median of 0.  Of fewer than :data:`FEW_RUNS` values, the larger
    of that and their standard deviation / |median|: with few runs the MAD passes over the one
    that strayed (two of three alike give a MAD of 0, and then any change beyond the practical
    limit would count), where the standard deviation takes it in."""
    if len(values) < MIN_RUNS:
        return None
    centre = statistics.median(values)
    if centre == 0:
        return None
    mad = statistics.median(abs(v - centre) for v in values)
    spread = MAD_TO_SIGMA * mad / abs(centre)
    if len(values) < FEW_RUNS:
        spread = max(spread, statistics.stdev(values) / abs(centre))
    return spread


def judge(
    *,
    base: float,
    new: float,
    unit: str,
    device: str,
    direction: Direction | None,
    thresholds: Thresholds,
    base_samples: Sequence[float] = (),
    new_samples: Sequence[float] = (),
    history: Sequence[float] = (),
    spread: float | None = None,
    spread_count: int = 0,
    known_good: bool = False,
) -> Judged:
    """The verdict on ``new`` against ``base`` (see the module docstring for the rule).

    ``history``: the figure in earlier comparable runs; ``spread``: a baseline's relative
    robust spread over ``spread_count`` figures; ``known_good``: ``base`` is a built-in
    known-good figure."""
    change = (new - base) / abs(base) if base else None
    if change is None:
        return Judged(
            verdict="unchanged",
            change=None,
            noise="base is 0: no relative change",
            reason="not_judged",
        )
    if direction is None:
        return Judged(
            verdict="unchanged",
            change=change,
            noise="no better side: not judged",
            reason="not_judged",
        )
    p_value, within = _within_run(base_samples, new_samples, thresholds.regression_alpha)
    rel_limit, abs_limit = practical_floor(unit, thresholds, device=device)
    if abs(change) <= rel_limit or abs(new - base) <= abs_limit:
        limit = f"±{rel_limit:.0%}" + (f" and ±{abs_limit:g} {unit}" if abs_limit else "")
        return Judged(
            verdict="unchanged",
            change=change,
            p_value=p_value,
            noise=f"within {limit}",
            reason="within_limit",
        )
    estimates = [within, _run_to_run(change, history, spread, spread_count, thresholds)]
    verdict_noise = _noise_verdict(
        estimates, change=change, device=device, known_good=known_good, thresholds=thresholds
    )
    if isinstance(verdict_noise, tuple):
        note, reason = verdict_noise
        return Judged(
            verdict="unchanged", change=change, p_value=p_value, noise=note, reason=reason
        )
    worse = change < 0 if direction == "higher" else change > 0
    severity: Literal["warn", "fail"] | None = None
    if worse:
        severity = "fail" if abs(change) > thresholds.regression_fail_rel else "warn"
    return Judged(
        verdict="regression" if worse else "improvement",
        change=change,
        severity=severity,
        p_value=p_value,
        noise=verdict_noise.note,
    )


def _noise_verdict(
    estimates: list[_Noise],
    *,
    change: float,
    device: str,
    known_good: bool,
    thresholds: Thresholds,
) -> _Noise | tuple[str, Reason]:
    """A :class:`_Noise` when the change is beyond the noise, else the note saying why not."""
    known = [e for e in estimates if e.beyond is not None]
    inside = [e.note for e in known if not e.beyond]
    if inside:
        return "inside the noise: " + "; ".join(inside), "inside_noise"
    if known_good:
        notes = [e.note for e in known]
        side = "below" if change < 0 else "above"
        return _Noise(beyond=True, note="; ".join([f"{side} a known-good figure", *notes]))
    if not known:
        return "noise unknown: " + "; ".join(e.note for e in estimates), "noise_unknown"
    if estimates[1].beyond is None:
        if device.startswith("cpu"):
            note = f"CPU worker: run-to-run noise unknown ({estimates[1].note}); "
            return note + estimates[0].note, "noise_unknown"
        if abs(change) <= thresholds.regression_min_rel_unknown:
            limit = f"{thresholds.regression_min_rel_unknown:.0%}"
            note = f"run-to-run noise unknown ({estimates[1].note}) and within ±{limit}; "
            return note + estimates[0].note, "noise_unknown"
    return _Noise(beyond=True, note="; ".join(e.note for e in known))


def _within_run(
    base: Sequence[float], new: Sequence[float], alpha: float
) -> tuple[float | None, _Noise]:
    n1, n2 = len(base), len(new)
    if min(n1, n2) < MIN_SAMPLES:
        return None, _Noise(beyond=None, note=f"{n1} vs {n2} repeats: no test")
    p = mann_whitney_p(base, new)
    smallest = 2 / math.comb(n1 + n2, n1)
    if smallest >= alpha:
        note = f"{n1} vs {n2} repeats: p cannot reach {alpha:g}"
        return p, _Noise(beyond=None, note=note)
    verb = "<" if p < alpha else ">="
    return p, _Noise(beyond=p < alpha, note=f"p={p:.2g} {verb} {alpha:g}")


def _run_to_run(
    change: float,
    history: Sequence[float],
    spread: float | None,
    spread_count: int,
    thresholds: Thresholds,
) -> _Noise:
    sigmas = thresholds.regression_noise_sigmas
    if spread is not None and spread_count >= MIN_RUNS:
        source = f"baseline of {spread_count}"
    else:
        spread = robust_spread(history)
        if spread is None:
            return _Noise(beyond=None, note=f"{len(history)} earlier runs (needs {MIN_RUNS})")
        source = f"{len(history)} earlier runs"
    limit = sigmas * spread
    verb = "beyond" if abs(change) > limit else "within"
    note = f"{verb} {sigmas:g} sigma of {source} (±{limit:.1%})"
    return _Noise(beyond=abs(change) > limit, note=note)
