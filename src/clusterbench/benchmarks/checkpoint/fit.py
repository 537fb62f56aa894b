"""How the ``checkpoint`` benchmark turns a bounded state into the times users ask about.

Pure functions, no I/O:

- :func:`halving_sizes`: the state sizes measured, each half the next;
- :func:`is_stable`: when to stop repeating one size (the spread is small, or enough rounds);
- :func:`fit_line`: the α–β model of one operation, t(S) = α + S/β, over the sizes measured
  (Theil–Sen; α is the fixed cost: opening files, metadata, fsync latency);
- :func:`held_out_error_pct`: the same model fitted without the largest size, checked on it;
- :func:`predicted_seconds`: t(S) for the checkpoint of a model of N parameters at B bytes per
  parameter (S = N·B), the formula docs/reference.md states with the layouts' bytes.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Fit",
    "ModelSize",
    "fit_line",
    "halving_sizes",
    "held_out_error_pct",
    "is_stable",
    "model_sizes",
    "predicted_seconds",
]


def halving_sizes(largest: int, num: int) -> list[int]:
    """``num`` target sizes, smallest first, each half the next: 4, 2, 1 GiB for 3 from 4 GiB."""
    if largest < 1 or num < 1:
        raise ValueError(f"largest and num must be >= 1, got {largest}, {num}")
    return [max(1, largest >> k) for k in reversed(range(num))]


def is_stable(
    series: Sequence[Sequence[float]], *, min_repeats: int, max_repeats: int, target_cv: float
) -> bool:
    """True once the rounds of one size may stop: ``max_repeats`` rounds done, or at least
    ``min_repeats`` with every series' coefficient of variation (stdev / mean) at most
    ``target_cv`` (e.g. the save and the load times, both)."""
    done = min((len(s) for s in series), default=0)
    if done >= max_repeats:
        return True
    if done < min(min_repeats, max_repeats):
        return False
    return all(_cv(s) <= target_cv for s in series)


def _cv(samples: Sequence[float]) -> float:
    if len(samples) < 2:
        return 0.0
    mean = statistics.fmean(samples)
    return statistics.stdev(samples) / mean if mean > 0 else float("inf")


@dataclass(frozen=True, slots=True)
class Fit:
    """t(S) = alpha_s + S / (gbps·1e9): one operation's seconds for S bytes."""

    alpha_s: float
    """Fixed cost of one operation, seconds (0 when fitted through the origin)."""
    gbps: float
    """Marginal bandwidth β, GB/s (1e9 B/s)."""

    def seconds(self, size_bytes: float) -> float:
        return self.alpha_s + size_bytes / (self.gbps * 1e9)


def fit_line(sizes: Sequence[float], seconds: Sequence[float]) -> Fit:
    """The line t = α + S/β through every (size, seconds) sample, sizes repeated per round.

    Theil–Sen (the median of the slopes between samples of different sizes, scipy.stats): one
    slow round among the others moves it little, where a least-squares line follows it.  A
    negative intercept (the fixed cost lost in the noise) becomes α = 0 with that slope.  One
    size, or a slope that is not positive (noise over sizes too alike): the median rate of the
    largest size's samples (α = 0, 1/β = median(t/S) there), the figure least made of fixed
    costs.
    """
    import scipy.stats

    s = np.asarray(sizes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if s.size == 0 or s.size != t.size or np.any(s <= 0) or np.any(t <= 0):
        raise ValueError("fit_line needs as many positive sizes as positive times")
    if np.unique(s).size >= 2:
        slope, alpha, _, _ = scipy.stats.theilslopes(t, s)
        if slope > 0:
            return Fit(alpha_s=max(0.0, float(alpha)), gbps=float(1.0 / slope / 1e9))
    largest = s == s.max()
    return Fit(alpha_s=0.0, gbps=float(1.0 / np.median(t[largest] / s[largest]) / 1e9))


def held_out_error_pct(sizes: Sequence[float], seconds: Sequence[float]) -> float | None:
    """Signed error, %, of the line fitted on the samples of every size but the largest, at the
    largest: (predicted − median measured) / median measured × 100.  None with fewer than 3
    sizes."""
    largest = max(sizes, default=0.0)
    if len(set(sizes)) < 3:
        return None
    rest = [(si, ti) for si, ti in zip(sizes, seconds, strict=True) if si != largest]
    fit = fit_line([si for si, _ in rest], [ti for _, ti in rest])
    measured = statistics.median(ti for si, ti in zip(sizes, seconds, strict=True) if si == largest)
    return 100.0 * (fit.seconds(largest) - measured) / measured


@dataclass(frozen=True, slots=True)
class ModelSize:
    """A model whose checkpoint time is predicted: its label and parameter count."""

    label: str
    num_params: int


def model_sizes(
    *, workload: str, workload_params: int, billions: Sequence[float]
) -> list[ModelSize]:
    """The workload's own model (its counted parameters) and ``billions`` (7, 70: nominal
    counts, 7e9 and 70e9), without repeats."""
    out = [ModelSize(workload, workload_params)]
    for b in billions:
        if b <= 0:
            raise ValueError(f"model sizes must be > 0 billion parameters, got {b}")
        size = ModelSize(f"{b:g}B", round(b * 1e9))
        if size.num_params not in {m.num_params for m in out}:
            out.append(size)
    return out


def predicted_seconds(fit: Fit, *, num_params: int, bytes_per_param: float) -> float:
    """Seconds of one operation on the checkpoint of ``num_params`` parameters:
    t = α + N·B / β (docs/reference.md, "Checkpoint time")."""
    return fit.seconds(num_params * bytes_per_param)
