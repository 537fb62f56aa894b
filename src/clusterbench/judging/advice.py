"""Advice: the findings that name a setting to change together with what it gains, gathered
into one list ranked by gain (the "what to change" at the top of the summary and the report).

The convention (a finding's ``evidence`` is a free dict, so results.json keeps schema 1): a
finding that is advice carries ``evidence["advice"]``, built by :func:`advice_evidence`::

    {"change": "export NCCL_ALGO=allreduce:Tree",   # the exact setting or command to change
     "gain": 0.12,                # fraction of what gain_of names: 12% less of it (better
     "better": "lower",           #   "lower", a time) or 12% more (better "higher", a rate)
     "gain_of": "all_reduce time at 32 KiB",
     "basis": "measured",         # or "predicted" (a model), "topology" (no gain: gain None)
     "noise": 0.02,               # optional: the 95% interval's half-width of the gain, or
                                  #   the model's error this run measured (predicted)
     "evidence": "7 vs 14 repeats, Mann-Whitney p 0.0003, 95% CI 1.38-1.45x"}

The standard behind it: advice is given only with its evidence.  A measured gain is one where
the setting beat the default beyond the noise in this run (the analysis' own test, named in
``evidence``); a predicted gain comes from a model whose own error this run measured, and must
exceed that error; topology advice (a launcher flag from the rank layout) has no gain and says
so.  A finding whose gain is inside the noise is no advice and carries none.

:func:`collect_advice` ranks by the speed-up a gain amounts to, so that less time and more
throughput rank on one scale (12% less time: 1 / 0.88 = 1.14x; 12% more samples/s: 1.12x);
measured before predicted at an equal gain; advice without a gain last.  Pure: no I/O.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from clusterbench.metrics import Direction
from clusterbench.schema import Finding, Results

__all__ = [
    "ADVICE_KEY",
    "Advice",
    "Basis",
    "SampleGain",
    "advice_evidence",
    "advice_of",
    "collect_advice",
    "compare_samples",
]

ADVICE_KEY = "advice"
Basis = Literal["measured", "predicted", "topology"]
_BASES: tuple[Basis, ...] = get_args(Basis)
_BASIS_RANK = {"measured": 0, "predicted": 1, "topology": 2}


@dataclass(frozen=True, slots=True, kw_only=True)
class Advice:
    """One setting to change, with what it gains and how that was shown."""

    change: str
    """The exact setting or command: ``export NCCL_ALGO=allreduce:Tree``."""
    gain: float | None
    """The fraction gained of :attr:`gain_of` (0.12: 12% less of a time, more of a rate);
    None for topology advice."""
    gain_of: str
    """What the gain is of: 'all_reduce time at 4 MiB–256 MiB', 'DataLoader samples/s'."""
    basis: Basis
    better: Direction = "lower"
    """``lower``: the gain is less of :attr:`gain_of` (a time); ``higher``: more (a rate)."""
    noise: float | None = None
    """The gain's 95% interval half-width (measured) or the model's measured error
    (predicted), as a fraction like :attr:`gain`; None where the analysis has none."""
    evidence: str = ""
    """One line: how it was shown (the test, the repeats, the interval)."""
    finding_id: str = ""
    scope: str = ""

    @property
    def source(self) -> str:
        """The benchmark (or run-wide analysis) the advice comes from: the finding id's head."""
        return self.finding_id.split(".", 1)[0]

    @property
    def speedup(self) -> float | None:
        """The gain as a speed-up factor: 1 / (1 - gain) for a time, 1 + gain for a rate."""
        if self.gain is None:
            return None
        return 1 / (1 - self.gain) if self.better == "lower" else 1 + self.gain

    def to_evidence(self) -> dict[str, Any]:
        """The ``evidence["advice"]`` dict (plain JSON types)."""
        gain = None if self.gain is None else round(self.gain, 6)
        out: dict[str, Any] = {
            "change": self.change, "gain": gain, "better": self.better,
            "gain_of": self.gain_of, "basis": self.basis, "evidence": self.evidence,
        }  # fmt: skip
        if self.noise is not None:
            out["noise"] = round(self.noise, 6)
        return out


def advice_evidence(
    *,
    change: str,
    gain: float | None,
    gain_of: str,
    basis: Basis,
    evidence: str,
    better: Direction = "lower",
    noise: float | None = None,
) -> dict[str, Any]:
    """``{"advice": {...}}`` to merge into a finding's evidence (``evidence={..., **this}``).

    Raises ValueError on advice that breaks the convention: no change; a gain that is not a
    positive fraction (below 1 for a time); measured or predicted without a gain, topology
    with one; a predicted gain without the model's error or not above it."""
    advice = Advice(change=change, gain=gain, gain_of=gain_of, basis=basis, better=better,
                    noise=noise, evidence=evidence)  # fmt: skip
    _check(advice)
    return {ADVICE_KEY: advice.to_evidence()}


def _check(a: Advice) -> None:
    if not a.change.strip():
        raise ValueError("advice needs the setting to change")
    if a.basis not in _BASES:
        raise ValueError(f"advice basis must be one of {', '.join(_BASES)}, got {a.basis!r}")
    if a.basis == "topology":
        if a.gain is not None:
            raise ValueError("topology advice has no measured gain")
        return
    if a.gain is None or not a.gain > 0 or (a.better == "lower" and not a.gain < 1):
        raise ValueError(f"a {a.basis} gain must be a fraction above 0, got {a.gain!r}")
    if not a.gain_of.strip() or not a.evidence.strip():
        raise ValueError("a gain needs what it is of and the evidence that shows it")
    if a.noise is not None and not a.noise >= 0:
        raise ValueError(f"the noise of a gain is a fraction >= 0, got {a.noise!r}")
    if a.basis == "predicted" and (a.noise is None or not a.gain > a.noise):
        raise ValueError("a predicted gain must exceed the model's measured error (noise)")


def advice_of(finding: Finding) -> Advice | None:
    """The finding's advice, or None (none, or a dict that breaks the convention: a results
    file from elsewhere must still render)."""
    raw = finding.evidence.get(ADVICE_KEY)
    if not isinstance(raw, Mapping):
        return None
    gain, noise = _number(raw.get("gain")), _number(raw.get("noise"))
    better = raw.get("better", "lower")
    try:
        advice = Advice(
            change=str(raw.get("change") or ""), gain=gain, gain_of=str(raw.get("gain_of") or ""),
            basis=raw.get("basis"), better=better if better in ("lower", "higher") else "lower",  # type: ignore[arg-type]
            noise=noise, evidence=str(raw.get("evidence") or ""), finding_id=finding.id,
            scope=finding.scope,
        )  # fmt: skip
        _check(advice)
    except ValueError:
        return None
    return advice


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _rank_key(a: Advice) -> tuple[int, float, int]:
    speedup = a.speedup
    return (speedup is None, -(speedup or 0.0), _BASIS_RANK[a.basis])


def collect_advice(source: Results | Iterable[Finding]) -> list[Advice]:
    """Every finding's advice, ranked by gain (measured first at an equal gain, then the
    advice without a gain, in finding order); the same change named by several findings
    once, where it ranks highest."""
    findings = source.findings if isinstance(source, Results) else list(source)
    found = [a for f in findings if (a := advice_of(f)) is not None]
    ranked = sorted(found, key=_rank_key)  # stable: finding order within a rank
    seen: set[str] = set()
    out = []
    for a in ranked:
        if a.change not in seen:
            seen.add(a.change)
            out.append(a)
    return out


# --- a measured gain beyond the noise ------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SampleGain:
    """A setting's repeats against the default's: the speed-up of the medians (above 1:
    better), its 95% bootstrap interval and the one-sided Mann-Whitney p that it is better."""

    speedup: float
    interval: tuple[float, float]
    p_value: float
    better: Direction
    beyond_noise: bool
    """p below alpha, the whole interval and the speed-up itself above 1."""

    @property
    def gain(self) -> float:
        """The speed-up as the fraction :class:`Advice` carries (less time, or more rate)."""
        return self._fraction(self.speedup)

    @property
    def noise(self) -> float:
        """The half-width of the interval, in the same fraction."""
        return (self._fraction(self.interval[1]) - self._fraction(self.interval[0])) / 2

    def _fraction(self, speedup: float) -> float:
        return 1 - 1 / speedup if self.better == "lower" else speedup - 1


_CONFIDENCE = 0.95
_RESAMPLES = 2000
_SEED = 0


def _speedup(base: Any, new: Any, axis: int = -1) -> Any:
    import numpy as np

    return np.median(new, axis=axis) / np.median(base, axis=axis)


def compare_samples(
    base: Sequence[float], new: Sequence[float], *, better: Direction, alpha: float
) -> SampleGain | None:
    """Whether ``new``'s repeats beat ``base``'s beyond the noise: a one-sided Mann-Whitney U
    test (``scipy.stats.mannwhitneyu``) p below ``alpha``, and the 95% bootstrap interval of
    the speed-up (percentile method, both resampled, 2,000 resamples, a fixed seed) wholly
    above 1.  The speed-up is median(new) / median(base) for a rate (``better`` higher), its
    inverse for a time.  None with too few repeats for p to reach ``alpha`` (the smallest
    one-sided p of n1 against n2 samples is 1 / C(n1 + n2, n1)) or with non-positive ones."""
    import numpy as np
    from scipy.stats import bootstrap, mannwhitneyu

    a, b = [float(v) for v in base], [float(v) for v in new]
    if len(a) < 2 or len(b) < 2 or 1 / math.comb(len(a) + len(b), len(a)) >= alpha:
        return None
    if min(a) <= 0 or min(b) <= 0:
        return None
    data = (np.asarray(a), np.asarray(b)) if better == "higher" else (np.asarray(b), np.asarray(a))
    ci = bootstrap(
        data, _speedup, vectorized=True, paired=False, n_resamples=_RESAMPLES,
        confidence_level=_CONFIDENCE, method="percentile", rng=np.random.default_rng(_SEED),
    ).confidence_interval  # fmt: skip
    alternative = "greater" if better == "higher" else "less"
    p = float(mannwhitneyu(b, a, alternative=alternative).pvalue)
    ratio = statistics.median(b) / statistics.median(a)
    speedup = ratio if better == "higher" else 1 / ratio
    interval = (float(ci.low), float(ci.high))
    return SampleGain(
        speedup=speedup, interval=interval, p_value=p, better=better,
        beyond_noise=p < alpha and interval[0] > 1 and speedup > 1,
    )  # fmt: skip
