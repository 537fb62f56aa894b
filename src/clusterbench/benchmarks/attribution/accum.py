"""The attribution benchmark's accumulation sweep: coordination idle per iteration (idle +
collective wait, % of the iteration, read from every rank's trace) by accumulation steps,
and whether it rises past four steps, as the bottleneck-analysis paper found.

The bottleneck-analysis paper (docs/sources.md; "Performance Benchmarking and Bottleneck
Analysis for Large-scale GPU-based AI Training Clusters", abstract): synchronisation
"introduces up to 11.7% idle time per iteration when gradient accumulation steps exceed four,
independent of network or compute capacity".

The rule (:func:`accum_statement`): the samples are one per rank and profiled iteration, idle
+ wait in % of that iteration.  The baseline is the samples at 1-4 steps together; for each
count k above four, the rise is median(samples at k) - median(baseline), in points of the
iteration, with its 95% bootstrap confidence interval (percentile method, both groups
resampled, 2,000 resamples, a fixed seed: the same results give the same statement).  Idle
rises past four steps when, at some k > 4, the whole interval lies above 0 (beyond the noise)
and the rise is at least ``accum_min_rise_pct`` points (an attribution setting, default 1).
The noise quoted is the interval's half-width.  Each side needs two samples or more.  Where
idle rises, the largest rise is advice (:mod:`.advice`): that share of the iteration less in
coordination idle at four steps or fewer, measured.

Pure functions: measurements in, curve, statement and findings out.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from clusterbench.benchmarks.attribution import ACCUM_MIN_RISE_PCT, AttributionMetrics
from clusterbench.judging.advice import advice_evidence
from clusterbench.judging.measurements import gpu_severity
from clusterbench.schema import Finding, Measurement, Results

__all__ = [
    "PAPER_IDLE_PCT",
    "PAPER_STEPS",
    "PAPER_STEPS_WORD",
    "AccumPoint",
    "AccumRise",
    "AccumStatement",
    "accum_curve",
    "accum_idle_findings",
    "accum_statement",
]

_A = AttributionMetrics
PAPER_IDLE_PCT = 11.7
"""The bottleneck-analysis paper's idle per iteration past four accumulation steps (its upper
figure), %."""
PAPER_STEPS = 4
"""Past this many accumulation steps the paper saw the idle."""
PAPER_STEPS_WORD = "four"
"""PAPER_STEPS in the messages."""
_CONFIDENCE = 0.95
_RESAMPLES = 2000
_SEED = 0
_FIX = (
    "Fewer accumulation steps or larger micro-batches (the same global batch in fewer, larger "
    "steps); overlap the final all-reduce with backward (DDP bucket sizes, bucket_cap_mb); "
    "check the host-side gaps in the traces (traces/rank-NNNNN.accum-KK.pt.trace.json.gz): "
    "data loading, Python overhead between micro-steps, and CUDA graphs "
    "(--set training.compile=true --set training.cuda_graphs=true) for launch-bound steps."
)
_CPU_FIX = (
    "Fewer accumulation steps or larger micro-batches (the same global batch in fewer, larger "
    "steps); overlap the final all-reduce with backward (DDP bucket_cap_mb); check the "
    "host-side gaps in the traces (traces/rank-NNNNN.accum-KK.pt.trace.json.gz): data "
    "loading and Python overhead between micro-steps (--set training.compile=true)."
)


@dataclass(frozen=True, slots=True)
class AccumPoint:
    """One accumulation count of the sweep."""

    accum_steps: int
    idle: dict[int, Measurement]
    """Per rank, its idle_pct (the mean over its profiled iterations)."""
    wait: dict[int, Measurement]
    """Per rank, its wait_pct."""
    idle_samples: list[float]
    """idle_pct of every rank's every iteration."""
    wait_samples: list[float]
    samples: list[float]
    """idle + wait of every rank's every iteration, % of the iteration."""


def accum_curve(ms: Iterable[Measurement]) -> list[AccumPoint]:
    """The sweep's points, in order of accumulation steps ([] without a sweep)."""
    means: dict[int, dict[str, dict[int, Measurement]]] = defaultdict(lambda: defaultdict(dict))
    per_iteration: dict[tuple[int, int, str], dict[str, float]] = defaultdict(dict)
    for m in ms:
        k = m.params.get("accum_steps")
        if not isinstance(k, int) or not (_A.idle_pct.matches(m) or _A.wait_pct.matches(m)):
            continue
        step = str(m.params.get("rank_step", "mean"))
        if step == "mean":
            means[k][m.metric][m.rank] = m
        else:
            per_iteration[(k, m.rank, step)][m.metric] = m.value
    points = []
    for k in sorted(means):
        both = [v for (kk, _, _), v in per_iteration.items() if kk == k and len(v) == 2]
        idle = [v[_A.idle_pct.name] for v in both]
        wait = [v[_A.wait_pct.name] for v in both]
        points.append(
            AccumPoint(
                accum_steps=k, idle=dict(means[k][_A.idle_pct.name]),
                wait=dict(means[k][_A.wait_pct.name]), idle_samples=idle, wait_samples=wait,
                samples=[i + w for i, w in zip(idle, wait, strict=True)],
            )
        )  # fmt: skip
    return points


@dataclass(frozen=True, slots=True)
class AccumRise:
    """One count above four against the baseline (1-4 steps)."""

    accum_steps: int
    median_pct: float
    rise_points: float
    """median at this count - the baseline's median, points of the iteration."""
    interval_points: tuple[float, float]
    """The rise's 95% bootstrap confidence interval."""
    beyond_noise: bool
    """The whole interval lies above 0."""
    rises: bool
    """Beyond the noise and at least the minimum rise: the paper's finding holds here."""

    @property
    def noise_points(self) -> float:
        """The interval's half-width."""
        return (self.interval_points[1] - self.interval_points[0]) / 2


@dataclass(frozen=True, slots=True)
class AccumStatement:
    baseline_steps: list[int]
    """The counts of the baseline (at most four)."""
    baseline_pct: float
    """Median idle + wait of the baseline's samples."""
    num_baseline_samples: int
    above: list[AccumRise]
    """Every count above four, in order."""
    min_rise_pct: float

    @property
    def rises(self) -> bool:
        return any(r.rises for r in self.above)


def _rise_interval(high: list[float], low: list[float]) -> tuple[float, float]:
    from scipy import stats

    def diff(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.median(x, axis=axis) - np.median(y, axis=axis)

    result = stats.bootstrap(
        (np.asarray(high), np.asarray(low)), diff, vectorized=True, paired=False,
        n_resamples=_RESAMPLES, confidence_level=_CONFIDENCE, method="percentile",
        rng=np.random.default_rng(_SEED),
    )  # fmt: skip
    interval = result.confidence_interval
    return float(interval.low), float(interval.high)


def accum_statement(points: list[AccumPoint], *, min_rise_pct: float) -> AccumStatement | None:
    """Whether idle + wait rises past four accumulation steps (the module's rule); None when
    the sweep cannot tell: no count at or below four, or none above, with two samples each."""
    base = [p for p in points if p.accum_steps <= PAPER_STEPS and p.samples]
    baseline = [s for p in base for s in p.samples]
    above = [p for p in points if p.accum_steps > PAPER_STEPS and len(p.samples) >= 2]
    if len(baseline) < 2 or not above:
        return None
    base_median = statistics.median(baseline)
    rises = []
    for p in above:
        median = statistics.median(p.samples)
        low, high = _rise_interval(p.samples, baseline)
        beyond = low > 0
        rises.append(
            AccumRise(
                accum_steps=p.accum_steps, median_pct=median, rise_points=median - base_median,
                interval_points=(low, high), beyond_noise=beyond,
                rises=beyond and median - base_median >= min_rise_pct,
            )
        )  # fmt: skip
    return AccumStatement(
        baseline_steps=[p.accum_steps for p in base], baseline_pct=base_median,
        num_baseline_samples=len(baseline), above=rises, min_rise_pct=min_rise_pct,
    )  # fmt: skip


def _min_rise_pct(results: Results) -> float:
    """The run's ``attribution.accum_min_rise_pct`` (its recorded settings), else the default."""
    benchmarks = results.run.config.get("benchmarks") or {}
    value = (benchmarks.get("attribution") or {}).get("accum_min_rise_pct")
    return float(value) if isinstance(value, int | float) else ACCUM_MIN_RISE_PCT


def _steps_label(steps: list[int]) -> str:
    return str(steps[0]) if len(steps) == 1 else f"{steps[0]}–{steps[-1]}"


def accum_idle_findings(results: Results) -> list[Finding]:
    """``attribution.accum_idle``: the statement, info when idle does not rise past four
    steps (or the sweep cannot tell), warn when it does (info on CPU workers)."""
    points = accum_curve(results.measurements)
    if not points:
        return []
    curve = {str(p.accum_steps): _median(p.samples) for p in points}
    statement = accum_statement(points, min_rise_pct=_min_rise_pct(results))
    evidence: dict[str, object] = {"median_pct": curve, "paper_pct": PAPER_IDLE_PCT}
    if statement is None:
        shown = ", ".join(f"{v:.1f}% at {k}" for k, v in curve.items() if v is not None)
        four = PAPER_STEPS_WORD
        message = (
            f"Coordination idle per iteration (idle + collective wait): {shown} accumulation "
            f"steps; the sweep has no count on both sides of {four} with two samples or more, "
            f"so the bottleneck-analysis paper's rise past {four} steps (up to "
            f"{PAPER_IDLE_PCT}%) is not tested here."
        )
        fix = f"Sweep both sides of {four}: --set attribution.accum_sweep=1,2,4,8."
        return [Finding(id="attribution.accum_idle", severity="info", scope="run",
                        message=message, evidence=evidence, fix=fix)]  # fmt: skip
    evidence.update(_statement_evidence(statement))
    evidence.update(_advice(statement, points))
    return [
        Finding(
            id="attribution.accum_idle",
            severity=gpu_severity(results, "warn") if statement.rises else "info",
            scope="run",
            message=_message(statement),
            evidence=evidence,
            fix=(_FIX if results.run.backend == "nccl" else _CPU_FIX) if statement.rises else "",
        )
    ]


def _advice(s: AccumStatement, points: list[AccumPoint]) -> dict[str, object]:
    """The largest rise that counts, as advice ({} where idle does not rise)."""
    rises = [r for r in s.above if r.rises and 0 < r.rise_points < 100]
    if not rises:
        return {}
    top = max(rises, key=lambda r: r.rise_points)
    low, high = top.interval_points
    at = next(len(p.samples) for p in points if p.accum_steps == top.accum_steps)
    base = _steps_label(s.baseline_steps)
    return advice_evidence(
        change=(
            f"at most {PAPER_STEPS} gradient accumulation steps (the same global batch in "
            f"larger micro-batches; {top.accum_steps} here)"
        ),
        gain=top.rise_points / 100,
        gain_of=(
            f"of the iteration in coordination idle at {top.accum_steps} accumulation steps "
            f"(against {base})"
        ),
        basis="measured",
        noise=top.noise_points / 100,
        evidence=(
            f"rise {top.rise_points:+.1f} points, 95% bootstrap CI {low:+.1f} to {high:+.1f}, "
            f"{at} rank-iterations at {top.accum_steps} steps vs {s.num_baseline_samples} at "
            f"{base}"
        ),
    )


def _median(samples: list[float]) -> float | None:
    return statistics.median(samples) if samples else None


def _statement_evidence(s: AccumStatement) -> dict[str, object]:
    return {
        "baseline_steps": s.baseline_steps,
        "baseline_pct": s.baseline_pct,
        "num_baseline_samples": s.num_baseline_samples,
        "rise_points": {str(r.accum_steps): r.rise_points for r in s.above},
        "interval_points": {str(r.accum_steps): list(r.interval_points) for r in s.above},
        "min_rise_pct": s.min_rise_pct,
        "rises": s.rises,
        "rule": (
            "rise = median(idle + wait at k) - median(at 1-4 steps), per rank and iteration; "
            f"rises when its 95% bootstrap interval lies above 0 and it is >= "
            f"{s.min_rise_pct:g} points"
        ),
    }


def _message(s: AccumStatement) -> str:
    at = ", ".join(
        f"{r.median_pct:.1f}% at {r.accum_steps} ({r.rise_points:+.1f} ±{r.noise_points:.1f} "
        f"points{', beyond the noise' if r.beyond_noise else ''})"
        for r in s.above
    )
    head = "Coordination idle per iteration (idle + collective wait)"
    base = f"{s.baseline_pct:.1f}% at {_steps_label(s.baseline_steps)} accumulation steps"
    paper = f"the bottleneck-analysis paper saw up to {PAPER_IDLE_PCT}%"
    if s.rises:
        return (
            f"{head} rises past {PAPER_STEPS_WORD} accumulation steps here: {base}, {at} ({paper})."
        )
    if any(r.beyond_noise for r in s.above):
        why = f"no rise of {s.min_rise_pct:g} point or more past {PAPER_STEPS_WORD} steps here"
    else:
        why = f"within the noise: no rise past {PAPER_STEPS_WORD} steps here"
    return f"{head}: {base}, {at}: {why} ({paper})."
