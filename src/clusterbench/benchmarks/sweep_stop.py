"""When a sweep has its answer: the stopping rules of the dataloader, gemm and collectives sweeps.

A sweep walks its points in a fixed order (worker counts, GEMM shapes by work, message sizes)
and records one figure per point (samples/s, TFLOP/s, busbw).  The rule they share is the
**plateau** (:class:`PlateauRule`): point ``i`` is *flat* when its figure fails to beat the best
figure before it by more than ``tolerance``, ``v_i < (1 + tolerance) x max(v_0..v_i-1)``; the
sweep stops after ``patience`` flat points in a row: the curve has flattened (or turned down),
so the points after it would not change the best.  Points before ``first`` (the latency-bound
sizes of a collective) add to the best but never count as flat.  The dataloader also stops
once the loader outruns the training step (:mod:`.dataloader.sweep`).

The rules use only the figures measured, in order, so the same figures give the same stop on
every rank that holds them (a collective's ranks decide from the times gathered over their
group: no rank stops alone).  A stopped sweep is recorded as a :class:`SweepStop` and one info
finding per rank (:func:`stop_finding`): the points not run are missing from the results, not
worse, and a comparison with a run of the whole sweep lists them as ``missing``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from clusterbench.schema import Finding

__all__ = [
    "PlateauRule",
    "StopReason",
    "SweepStop",
    "flat_run",
    "plateau_stop",
    "ratio_text",
    "stop_finding",
]

StopReason = Literal["plateau", "sufficient"]


def flat_run(values: Sequence[float], *, tolerance: float, first: int = 0) -> int:
    """How many of the last points, in a row, are flat: each below (1 + ``tolerance``) x the
    best before it; points before index ``first`` are never flat."""
    run = 0
    best = None
    for i, v in enumerate(values):
        flat = i >= max(first, 1) and best is not None and v < (1.0 + tolerance) * best
        run = run + 1 if flat else 0
        best = v if best is None else max(best, v)
    return run


def ratio_text(x: float) -> str:
    """'3.1x', '1,527x': one decimal below 10."""
    return f"{x:.1f}x" if x < 10 else f"{x:,.0f}x"


@dataclass(frozen=True, kw_only=True, slots=True)
class PlateauRule:
    """Stop after ``patience`` flat points in a row (see the module docstring)."""

    tolerance: float
    """Smallest relative gain over the best so far that is not flat (0.05: 5%)."""
    patience: int
    """Flat points in a row that end the sweep."""

    def __post_init__(self) -> None:
        if not 0 <= self.tolerance < 1:
            raise ValueError(f"plateau_tolerance must be in [0, 1), got {self.tolerance}")
        if self.patience < 1:
            raise ValueError(f"plateau_patience must be >= 1, got {self.patience}")

    def reached(self, values: Sequence[float], *, first: int = 0) -> bool:
        return flat_run(values, tolerance=self.tolerance, first=first) >= self.patience

    def describe(self, *, points: str, figure: str) -> str:
        """The rule in words: '2 successive worker counts each add less than 10% to the best
        samples/s before them'."""
        return (
            f"{self.patience} successive {points} each add less than {self.tolerance:.0%} to "
            f"the best {figure} before them"
        )

    def params(self) -> dict[str, Any]:
        return {"tolerance": self.tolerance, "patience": self.patience}


@dataclass(frozen=True, kw_only=True, slots=True)
class SweepStop:
    """One sweep that ended early: where, why, and the points it left out."""

    sweep: str
    """Which sweep: 'images', 'bf16', 'all_reduce on world'."""
    reason: StopReason
    last: str
    """The last point measured: '4 workers', '8192x8192x8192', '512 MiB'."""
    skipped: tuple[str, ...]
    """The points not run, in sweep order."""
    detail: str
    """Why, with the numbers: 'the loader gives 3.1x the step's demand'."""
    best: float
    """The best figure measured."""

    def sentence(self) -> str:
        return f"{self.sweep} at {self.last}: {self.detail}; not run: {', '.join(self.skipped)}"

    def evidence(self) -> dict[str, Any]:
        return {
            "sweep": self.sweep,
            "reason": self.reason,
            "last": self.last,
            "skipped": list(self.skipped),
            "detail": self.detail,
            "best": self.best,
        }


def plateau_stop(
    rule: PlateauRule,
    *,
    sweep: str,
    points: Sequence[tuple[str, float]],
    rest: Sequence[str],
    noun: str,
    unit: str,
    first: int = 0,
) -> SweepStop | None:
    """The stop of a sweep after ``points`` (each point's label and figure, in order) where
    ``rule`` says the plateau is reached and ``rest`` is not empty; None: go on."""
    if not rest or not points or not rule.reached([v for _, v in points], first=first):
        return None
    best_label, best = max(points, key=lambda p: p[1])
    detail = (
        f"the last {rule.patience} {noun} added less than {rule.tolerance:.0%} to the best, "
        f"{best:.4g} {unit} at {best_label}"
    )
    return SweepStop(sweep=sweep, reason="plateau", last=points[-1][0], skipped=tuple(rest),
                     detail=detail, best=best)  # fmt: skip


def stop_finding(
    benchmark: str,
    stops: Sequence[SweepStop],
    *,
    scope: str,
    rule: str,
    settings: dict[str, Any],
) -> Finding:
    """The info finding of one rank's stopped sweeps (``rule``: when the sweep stops, in
    words; ``settings``: the values the rule used, for the evidence)."""
    return Finding(
        id=f"{benchmark}.sweep_stopped",
        severity="info",
        scope=scope,
        message=(
            f"The {benchmark} sweep stopped once it had its answer: "
            + "; ".join(s.sentence() for s in stops)
            + f". It stops where {rule}."
        ),
        evidence={"rule": rule, "settings": settings, "stops": [s.evidence() for s in stops]},
        fix=(
            f"Nothing to fix. `--set {benchmark}.sweep_stop=false` runs every point (the full "
            "suite does); points left out show as missing, not worse, when runs are compared."
        ),
    )
