"""The decision of one compared figure: a regression, an improvement, or unchanged.

A change counts only when it is beyond **both** limits:

1. the practical limit of its unit (:func:`clusterbench.thresholds.practical_floor`: a fraction,
   e.g. 5%, and for latencies and durations an absolute floor as well; CPU workers a larger
   fraction, ``regression_min_rel_cpu``);
2. the noise (:mod:`clusterbench.analyses.compare.noise`):

   - run-to-run: with 3 or more earlier comparable runs, the change ``log(new / base)``
     against the figure's spread over them (:func:`~clusterbench.analyses.compare.noise.log_spread`,
     never less than the spread of its kind over the same runs,
     :func:`~clusterbench.analyses.compare.noise.group_spread`), a Student t test with one degree of
     freedom fewer than the runs; against a fleet baseline of 3 or more figures, the same with
     the baseline's spread;
   - within-run: a two-sided Mann-Whitney U test of the two runs' repeat samples
     (``Stats.values``), where both runs have 3 or more and p can reach ``regression_alpha``:
     a change inside it is inside the noise.  Alone (no run-to-run estimate), it misses how
     much the next run differs: on GPUs it judges only beyond ``regression_min_rel_unknown``
     (15%), and never as ``fail``; on CPU workers, whose run-to-run swings dwarf the repeats'
     spread, not at all.

   The p-values of every row of one comparison then pass the Benjamini-Hochberg procedure at
   ``regression_false_alarms`` (:func:`control_false_alarms`): with nothing changed, the chance
   that a comparison reports any change at all is at most that.  Without any estimate the noise
   is unknown and the row stays ``unchanged`` with a note that says so.  A built-in
   known-good figure needs no noise estimate: it is what a healthy GPU of that model reaches,
   so the practical limit below it is the rule.

Metrics with no better side (``Metric.better == "none"``: ratios, shares, counts) are shown,
never judged; nor are tails (``Metric.tail``: a maximum or a 99th percentile), whose noise is
the noise of a few extreme samples.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

from clusterbench.analyses.compare.mann_whitney import mann_whitney_p
from clusterbench.analyses.compare.noise import (
    MAD_TO_SIGMA,
    KindSpread,
    bh_cutoff,
    log_spread,
    simes_p,
    t_two_sided_p,
)
from clusterbench.metrics import Direction
from clusterbench.thresholds import Thresholds, practical_floor

__all__ = [
    "MAD_TO_SIGMA",
    "MIN_RUNS",
    "MIN_SAMPLES",
    "Judged",
    "Reason",
    "Verdict",
    "control_false_alarms",
    "judge",
]

Verdict = Literal["regression", "improvement", "unchanged", "new", "missing"]
Reason = Literal["within_limit", "inside_noise", "noise_unknown", "not_judged"]
"""Why a row is ``unchanged``: inside the practical limit, beyond it but inside the noise,
beyond it with no estimate of the noise, or not judged (no better side, a tail, a base of 0)."""
MIN_SAMPLES = 3
"""Repeats each run needs before the within-run test applies."""
MIN_RUNS = 3
"""Earlier runs (or baseline figures) needed before the run-to-run noise is known."""
KIND_DF_MAX = 30
"""The most degrees of freedom a kind's spread lends (beyond, Student's t is about normal)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Judged:
    verdict: Verdict
    change: float | None
    """(new - base) / |base|; None when base is 0."""
    severity: Literal["warn", "fail"] | None = None
    p_value: float | None = None
    """The p-value that judged the change: the run-to-run test's where there is one, else the
    within-run test's; None without a test."""
    noise: str = ""
    """How the noise was judged, or why the row was not judged."""
    reason: Reason | None = None
    """Why it is ``unchanged`` (None otherwise)."""


@dataclass(frozen=True, slots=True)
class _Test:
    p: float | None
    """None: no estimate."""
    note: str


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
    kind_spread: KindSpread | None = None,
    spread: float | None = None,
    spread_count: int = 0,
    known_good: bool = False,
    tail: bool = False,
) -> Judged:
    """The verdict on ``new`` against ``base`` before the false alarms of the whole comparison
    are held (:func:`control_false_alarms`; see the module docstring for the rule).

    ``history``: the figure in earlier comparable runs; ``kind_spread``: the run-to-run spread
    of its kind over those runs; ``spread``: a baseline's relative robust spread over
    ``spread_count`` figures (``base`` is then their median); ``known_good``: ``base`` is a
    built-in known-good figure; ``tail``: a maximum or percentile, not judged."""
    change = (new - base) / abs(base) if base else None
    if change is None:
        return Judged(verdict="unchanged", change=None, noise="base is 0: no relative change",
                      reason="not_judged")  # fmt: skip
    if direction is None or tail:
        note = "a tail (max, p99): not judged" if tail else "no better side: not judged"
        return Judged(verdict="unchanged", change=change, noise=note, reason="not_judged")
    within = _within_run(base_samples, new_samples, thresholds.regression_alpha)
    run = _run_to_run(base, new, history, kind_spread, spread, spread_count)
    p_value = run.p if run.p is not None else within.p
    rel_limit, abs_limit = practical_floor(unit, thresholds, device=device)
    if abs(change) <= rel_limit or abs(new - base) <= abs_limit:
        limit = f"±{rel_limit:.0%}" + (f" and ±{abs_limit:g} {unit}" if abs_limit else "")
        return Judged(verdict="unchanged", change=change, p_value=p_value,
                      noise=f"within {limit}", reason="within_limit")  # fmt: skip
    inside = _inside(within, run, change=change, device=device, known_good=known_good,
                     thresholds=thresholds)  # fmt: skip
    if inside is not None:
        note, reason = inside
        return Judged(verdict="unchanged", change=change, p_value=p_value, noise=note,
                      reason=reason)  # fmt: skip
    worse = change < 0 if direction == "higher" else change > 0
    severity: Literal["warn", "fail"] | None = None
    if worse:
        # a fail needs the run-to-run noise (or a known-good figure): the repeats of one run
        # alone never say how far the next run strays
        known = run.p is not None or known_good
        severity = "fail" if known and abs(change) > thresholds.regression_fail_rel else "warn"
    notes = ["below a known-good figure" if change < 0 else "above a known-good figure"]
    notes = (notes if known_good else []) + [t.note for t in (run, within) if t.p is not None]
    return Judged(
        verdict="regression" if worse else "improvement",
        change=change,
        severity=severity,
        p_value=None if known_good else p_value,
        noise="; ".join(notes),
    )


def _inside(
    within: _Test,
    run: _Test,
    *,
    change: float,
    device: str,
    known_good: bool,
    thresholds: Thresholds,
) -> tuple[str, Reason] | None:
    """Why a change beyond the practical limit is not one (a note and the reason), or None."""
    if within.p is not None and within.p >= thresholds.regression_alpha:
        return f"inside the noise: {within.note}", "inside_noise"
    if known_good or run.p is not None:
        return None
    if within.p is None:
        return f"noise unknown: {run.note}; {within.note}", "noise_unknown"
    if device.startswith("cpu"):
        return f"CPU worker: run-to-run noise unknown ({run.note}); {within.note}", "noise_unknown"
    if abs(change) <= thresholds.regression_min_rel_unknown:
        limit = f"{thresholds.regression_min_rel_unknown:.0%}"
        note = f"run-to-run noise unknown ({run.note}) and within ±{limit}; {within.note}"
        return note, "noise_unknown"
    return None


def _within_run(base: Sequence[float], new: Sequence[float], alpha: float) -> _Test:
    n1, n2 = len(base), len(new)
    if min(n1, n2) < MIN_SAMPLES:
        return _Test(None, f"{n1} vs {n2} repeats: no test")
    smallest = 2 / math.comb(n1 + n2, n1)
    if smallest >= alpha:
        return _Test(None, f"{n1} vs {n2} repeats: p cannot reach {alpha:g}")
    p = mann_whitney_p(base, new)
    return _Test(p, f"repeats p={p:.2g}")


def _run_to_run(
    base: float,
    new: float,
    history: Sequence[float],
    kind_spread: KindSpread | None,
    spread: float | None,
    spread_count: int,
) -> _Test:
    """Student t of log(new / base) against the run-to-run spread: from a baseline (``base``
    its median of ``spread_count`` figures), else from ``history`` (``base`` one run like
    them), never below ``kind_spread``."""
    if spread is not None and spread_count >= MIN_RUNS:
        sigma, df, source = spread, spread_count - 1, f"baseline of {spread_count}"
        scale = math.sqrt(1 + 1 / spread_count)  # a new figure against the median of many
    else:
        own = log_spread(history, min_values=MIN_RUNS)
        if own is None:
            return _Test(None, f"{len(history)} earlier runs (needs {MIN_RUNS})")
        runs, source = len(history), f"{len(history)} earlier runs"
        sigma, df = own, runs - 1
        if kind_spread is not None and kind_spread.spread > own:
            # the spread of its kind, from many strays: known better than from one figure's
            sigma, df = kind_spread.spread, max(df, min(kind_spread.strays - 1, KIND_DF_MAX))
            source += f", of its kind over {kind_spread.strays} values"
        scale = math.sqrt(2)  # two runs, each one draw of the noise
    if base <= 0 or new <= 0:
        return _Test(None, "a value <= 0: no run-to-run test")
    if sigma == 0:
        return _Test(0.0, f"run-to-run spread 0 over {source}")
    t = math.log(new / base) / (sigma * scale)
    p = t_two_sided_p(t, df)
    return _Test(p, f"run-to-run p={p:.2g} (spread ±{sigma:.1%} over {source})")


def control_false_alarms(
    judged: Sequence[Judged], q: float, families: Sequence[Hashable] | None = None
) -> list[Judged]:
    """Every row whose p-value is not a discovery at ``q`` made ``unchanged`` (inside the
    noise); the others' notes say the rule.

    Rows come in ``families`` (one kind of figure: a metric on one device), which a regression
    tends to move together (a slow GEMM slows every shape): the families are tested first,
    each by the Simes combination of its rows' p-values, by Benjamini-Hochberg at ``q``; then
    the rows of each family found, by Benjamini-Hochberg at ``q`` x found / families
    (Benjamini and Bogomolov 2014).  Every row with a p-value counts, those within the
    practical limit too.  Without ``families`` each row is its own."""
    keys = list(families) if families is not None else list(range(len(judged)))
    by_family: dict[Hashable, list[float]] = defaultdict(list)
    for key, j in zip(keys, judged, strict=True):
        if j.p_value is not None:
            by_family[key].append(j.p_value)
    if not by_family:
        return list(judged)
    simes = {key: simes_p(ps) for key, ps in by_family.items()}
    found_cutoff = bh_cutoff(list(simes.values()), q)
    found = [key for key, p in simes.items() if p <= found_cutoff]
    level = q * len(found) / len(by_family)
    cutoffs = {key: bh_cutoff(by_family[key], level) for key in found}
    rule = f"false alarms held at {q * 100:g}% over {sum(map(len, by_family.values()))} rows"
    out = []
    for key, j in zip(keys, judged, strict=True):
        if j.verdict not in ("regression", "improvement") or j.p_value is None:
            out.append(j)
        elif j.p_value <= cutoffs.get(key, -1.0):
            out.append(dataclasses.replace(j, noise=f"{j.noise}; {rule}"))
        else:
            note = f"inside the noise: {j.noise}; not beyond it with {rule}"
            out.append(dataclasses.replace(j, verdict="unchanged", severity=None, noise=note,
                                           reason="inside_noise"))  # fmt: skip
    return out
